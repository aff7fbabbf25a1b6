#include "checkpoint/process/inet_sockets.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "common/number.h"

namespace nvproxy::checkpoint {

namespace fs = std::filesystem;

std::string inet_address(const std::string& hex, bool v6) {
  auto colon = hex.find(':');
  if (colon == std::string::npos) return hex;
  std::string addr = hex.substr(0, colon);
  const auto parsed_port = parse_number<unsigned>(std::string_view(hex).substr(colon + 1), 16);
  if (!parsed_port) return hex;
  const unsigned port = *parsed_port;
  if (!v6 && addr.size() == 8) {
    // The kernel prints the address as a host-order (little-endian here) 32-bit number.
    const auto parsed = parse_number<unsigned long>(addr, 16);
    if (!parsed) return hex;
    const unsigned long a = *parsed;
    return std::to_string(a & 0xff) + "." + std::to_string((a >> 8) & 0xff) + "." + std::to_string((a >> 16) & 0xff) + "." +
           std::to_string((a >> 24) & 0xff) + ":" + std::to_string(port);
  }
  if (addr.find_first_not_of('0') == std::string::npos) addr = "::";
  return "[" + addr + "]:" + std::to_string(port);
}

namespace {

struct TableEntry {
  std::string proto, local;
  bool listening = false;
};

// inode -> entry, from one process's view of its network namespace's tables.
std::map<unsigned long, TableEntry> socket_tables(const fs::path& net) {
  std::map<unsigned long, TableEntry> out;
  for (const char* proto : {"tcp", "tcp6", "udp", "udp6", "udplite", "udplite6"}) {
    std::ifstream in(net / proto);
    std::string line;
    std::getline(in, line);  // header
    bool v6 = std::string(proto).back() == '6';
    bool tcp = std::string(proto).rfind("tcp", 0) == 0;
    while (std::getline(in, line)) {
      // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode ...
      std::istringstream f(line);
      std::string sl, local, remote, st, queues, timer, retr, uid, timeout;
      unsigned long inode = 0;
      if (!(f >> sl >> local >> remote >> st >> queues >> timer >> retr >> uid >> timeout >> inode) || inode == 0) continue;
      out[inode] = {proto, inet_address(local, v6), tcp && st == "0A"};
    }
  }
  return out;
}

}  // namespace

std::vector<InetSocket> inet_sockets(const std::vector<pid_t>& pids, const fs::path& proc) {
  std::vector<InetSocket> out;
  for (pid_t pid : pids) {
    fs::path p = proc / std::to_string(pid);
    std::vector<std::pair<int, unsigned long>> fds;
    std::error_code ec;
    for (fs::directory_iterator it(p / "fd", ec), end; !ec && it != end; it.increment(ec)) {
      std::error_code lec;
      std::string target = fs::read_symlink(it->path(), lec).string();
      if (lec || target.rfind("socket:[", 0) != 0) continue;
      const auto fd = parse_number<int>(it->path().filename().string());
      const auto ino = parse_leading_number<unsigned long>(std::string_view(target).substr(8));  // "socket:[N]"
      if (fd && ino) fds.emplace_back(*fd, *ino);
    }
    if (fds.empty()) continue;
    std::sort(fds.begin(), fds.end());
    auto tables = socket_tables(p / "net");
    for (const auto& [fd, inode] : fds) {
      auto t = tables.find(inode);
      if (t == tables.end()) continue;  // a unix or netlink socket
      out.push_back({pid, fd, t->second.proto, t->second.local, t->second.listening, inode});
    }
  }
  return out;
}

}  // namespace nvproxy::checkpoint
