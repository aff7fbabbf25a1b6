#include "checkpoint/preflight/criu_dump_checks.h"

#include <sys/stat.h>

#include <algorithm>

#include "checkpoint/process/inet_sockets.h"
#include "checkpoint/shared/holder_scan.h"
#include "checkpoint/shared/proc_maps.h"
#include "common/number.h"
#include "common/process.h"

namespace nvproxy::checkpoint {

namespace fs = std::filesystem;

namespace {

constexpr const char* kIoUring = "anon_inode:[io_uring]";

std::string comm_of(const fs::path& proc, pid_t pid) {
  return checkpoint::comm_of(proc / std::to_string(pid));
}

std::string fd_list(const std::vector<int>& fds) {
  std::string s;
  for (int fd : fds) s += (s.empty() ? "" : ",") + std::to_string(fd);
  return s;
}

// The connected TCP sockets of pids (what CRIU dumps only with tcp-established, and locks).
std::vector<InetSocket> established_tcp(const std::vector<pid_t>& pids, const fs::path& proc) {
  std::vector<InetSocket> out;
  for (auto& s : inet_sockets(pids, proc))
    if (!s.listening && s.proto.rfind("tcp", 0) == 0) out.push_back(std::move(s));
  return out;
}

}  // namespace

bool has_criu_option(const std::vector<std::string>& options, const std::string& name) {
  for (std::string o : options) {
    if (o.rfind("--", 0) == 0) o.erase(0, 2);
    if (o == name || o.rfind(name + " ", 0) == 0 || o.rfind(name + "=", 0) == 0) return true;
  }
  return false;
}

std::vector<IoUringUse> io_uring_users(const std::vector<pid_t>& pids, const fs::path& proc) {
  std::vector<IoUringUse> out;
  for (pid_t pid : pids) {
    IoUringUse u{.pid = pid};
    const fs::path dir = proc / std::to_string(pid);
    std::error_code ec;
    for (fs::directory_iterator it(dir / "fd", ec), end; !ec && it != end; it.increment(ec)) {
      std::error_code rec;
      fs::path target = fs::read_symlink(it->path(), rec);
      if (!rec && target.string() == kIoUring)
        if (auto fd = parse_number<int>(it->path().filename().string())) u.fds.push_back(*fd);
    }
    if (auto maps = read_maps(dir / "maps"))
      for (const MapsEntry& m : *maps)
        if (m.path.find("[io_uring]") != std::string::npos) ++u.mappings;
    if (u.fds.empty() && u.mappings == 0) continue;
    std::sort(u.fds.begin(), u.fds.end());
    u.name = comm_of(proc, pid);
    out.push_back(std::move(u));
  }
  return out;
}

std::optional<SnapshotProblem> IoUringCheck::check(const std::vector<pid_t>& pids) {
  auto users = io_uring_users(pids, proc_);
  if (users.empty()) return std::nullopt;
  SnapshotProblem p;
  p.key = "io_uring";
  nlohmann::json js = nlohmann::json::array();
  for (const auto& u : users) {
    js.push_back({{"pid", u.pid}, {"name", u.name}, {"fds", u.fds}, {"mappings", u.mappings}});
    std::string what = u.fds.empty() ? std::to_string(u.mappings) + " mappings of io_uring rings (the fd closed)"
                                     : "an io_uring instance on fd " + fd_list(u.fds) +
                                           (u.mappings ? " (" + std::to_string(u.mappings) + " ring mappings)" : "");
    p.hints[u.pid] = "pid " + std::to_string(u.pid) + " (" + u.name + ") holds " + what +
                     ", which CRIU cannot checkpoint; a libuv program (PyTorch's TCPStore, Node.js) stops using it with "
                     "UV_USE_IO_URING=0 in the container's environment (PyTorch: or USE_LIBUV=0); otherwise end what "
                     "created it before checkpointing";
  }
  p.reason = "the runtime's snapshot would fail: " + std::to_string(users.size()) +
             (users.size() == 1 ? " process uses" : " processes use") +
             " io_uring, which CRIU cannot dump; set UV_USE_IO_URING=0 for libuv programs, or stop the io_uring user";
  p.details = {{"processes", js}};
  return p;
}

std::optional<SnapshotProblem> TcpEstablishedCheck::check(const std::vector<pid_t>& pids) {
  if (allowed_) return std::nullopt;
  std::vector<InetSocket> connected = established_tcp(pids, proc_);
  if (connected.empty()) return std::nullopt;
  SnapshotProblem p;
  p.key = "tcp";
  nlohmann::json js = nlohmann::json::array();
  for (const auto& s : connected) {
    js.push_back({{"pid", s.pid}, {"fd", s.fd}, {"proto", s.proto}, {"local", s.local}});
    std::string& h = p.hints[s.pid];
    std::string what = s.proto + " " + s.local + " on fd " + std::to_string(s.fd);
    h = h.empty() ? "pid " + std::to_string(s.pid) + " (" + comm_of(proc_, s.pid) + ") has an established TCP connection: " + what
                  : h + ", " + what;
  }
  p.reason = "the runtime's snapshot would fail: the container has " + std::to_string(connected.size()) +
             (connected.size() == 1 ? " established TCP connection" : " established TCP connections") +
             " and CRIU is not asked to keep them: checkpoint with tcp-established (containerd's OpenTcp option, "
             "runc --tcp-established) or add \"tcp-established\" to checkpoint.criu_options";
  p.details = {{"connections", js}};
  return p;
}

std::optional<SnapshotProblem> NetworkLockCheck::check(const std::vector<pid_t>& pids) {
  if (pids.empty() || has_criu_option(options_, "network-lock")) return std::nullopt;
  // What CRIU will lock: the container's own network, or (tcp-established) each connection.
  pid_t own = 0;
  struct stat mine {};
  if (::stat((proc_ / "self/ns/net").c_str(), &mine) == 0)
    for (pid_t pid : pids) {
      struct stat theirs {};
      if (::stat((proc_ / std::to_string(pid) / "ns/net").c_str(), &theirs) != 0) continue;
      if (theirs.st_ino != mine.st_ino || theirs.st_dev != mine.st_dev) {
        own = pid;
        break;
      }
    }
  std::optional<InetSocket> conn;
  if (own == 0 && tcp_)
    if (auto c = established_tcp(pids, proc_); !c.empty()) conn = std::move(c.front());
  if (own == 0 && !conn) return std::nullopt;  // nothing to lock
  if (!find_program("iptables-restore", path_).empty()) return std::nullopt;
  std::string nft = find_program("nft", path_);
  SnapshotProblem p;
  p.key = "network_lock";
  p.reason = std::string("the runtime's snapshot would fail: ") +
             (own ? "the container has a network namespace of its own, which CRIU locks"
                  : "CRIU locks each established TCP connection it dumps (tcp-established)") +
             " during the dump with iptables-restore, and no iptables-restore is in PATH (" + path_ +
             "); install iptables, or add \"network-lock " + (nft.empty() ? "skip" : "nftables") +
             "\" to checkpoint.criu_options" + (nft.empty() ? " (the network is then not locked while it is dumped)" : "");
  pid_t who = own ? own : conn->pid;
  p.hints[who] =
      "pid " + std::to_string(who) + " (" + comm_of(proc_, who) + ") " +
      (own ? std::string("runs in a network namespace of its own")
           : "has an established TCP connection: " + conn->proto + " " + conn->local + " on fd " + std::to_string(conn->fd));
  p.details = {{"pid", who}, {"path", path_}, {"missing", "iptables-restore"}, {"nft", nft}};
  return p;
}

}  // namespace nvproxy::checkpoint
