#include "checkpoint/shared/comm_probe.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "checkpoint/shared/proc_maps.h"
#include "common/number.h"

namespace nvproxy::checkpoint {

namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) return {};
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool starts_with(const std::string& s, const std::string& p) {
  return s.compare(0, p.size(), p) == 0;
}

std::string strip_deleted(std::string s) {
  const std::string d = " (deleted)";
  if (s.size() > d.size() && s.compare(s.size() - d.size(), d.size(), d) == 0) s.resize(s.size() - d.size());
  return s;
}

bool is_nccl_shm(const std::string& path) {
  return starts_with(path, "/dev/shm/nccl-");
}

// The address of a /proc/net/tcp endpoint, without the port.
std::string address_of(const std::string& hex_endpoint) {
  std::string e = tcp_endpoint(hex_endpoint);
  auto colon = e.rfind(':');
  return colon == std::string::npos ? e : e.substr(0, colon);
}

bool loopback(const std::string& addr) {
  return starts_with(addr, "127.") || addr == "[00000000000000000000000001000000]";
}

// @tmp/nccl-socket-<rank>-<hash>: the rank, or -1.
int nccl_socket_rank(const std::string& name) {
  auto at = name.find("nccl-socket-");
  if (at == std::string::npos) return -1;
  const auto rank = parse_leading_number<int>(std::string_view(name).substr(at + 12));
  return rank && *rank >= 0 ? *rank : -1;
}

}  // namespace

std::string tcp_endpoint(const std::string& hex) {
  auto colon = hex.find(':');
  if (colon == std::string::npos) return hex;
  std::string addr = hex.substr(0, colon);
  const auto parsed_port = parse_number<unsigned>(std::string_view(hex).substr(colon + 1), 16);
  if (!parsed_port) return hex;
  const unsigned port = *parsed_port;
  if (addr.size() == 32 && addr.compare(0, 24, "0000000000000000FFFF0000") == 0) addr = addr.substr(24);  // ::ffff:a.b.c.d
  if (addr.size() == 8) {
    const auto parsed = parse_number<unsigned long>(addr, 16);  // host byte order (little endian) of a network-order address
    if (!parsed) return hex;
    const unsigned long a = *parsed;
    char buf[32];
    std::snprintf(buf, sizeof buf, "%lu.%lu.%lu.%lu:%u", a & 0xff, (a >> 8) & 0xff, (a >> 16) & 0xff, (a >> 24) & 0xff, port);
    return buf;
  }
  return "[" + addr + "]:" + std::to_string(port);
}

std::map<unsigned long, std::pair<std::string, std::string>> parse_tcp_table(const std::string& text) {
  std::map<unsigned long, std::pair<std::string, std::string>> out;
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string sl, local, remote, st, queues, timer, retr, uid, timeout, inode;
    if (!(ls >> sl >> local >> remote >> st >> queues >> timer >> retr >> uid >> timeout >> inode)) continue;
    if (st != "01") continue;  // TCP_ESTABLISHED
    if (auto ino = parse_number<unsigned long>(inode); ino && *ino != 0) out[*ino] = {local, remote};
  }
  return out;
}

std::map<unsigned long, std::string> parse_unix_table(const std::string& text) {
  std::map<unsigned long, std::string> out;
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string num, ref, proto, flags, type, st, inode, path;
    if (!(ls >> num >> ref >> proto >> flags >> type >> st >> inode)) continue;
    if (!(ls >> path) || path.empty()) continue;
    while (path.size() > 1 && path.back() == '@') path.pop_back();  // abstract names are shown NUL-padded as '@'
    if (auto ino = parse_number<unsigned long>(inode)) out[*ino] = path;
  }
  return out;
}

std::map<pid_t, CommFinding> ProcCommProbe::scan(const std::vector<pid_t>& pids) {
  std::map<pid_t, CommFinding> out;
  std::map<pid_t, std::set<unsigned long>> sockets;                  // pid -> socket inodes
  std::map<unsigned long, std::pair<std::string, std::string>> tcp;  // inode -> local|remote
  std::map<unsigned long, std::string> unix_paths;
  std::set<std::string> tables_read;  // network namespaces already read
  for (pid_t pid : pids) {
    fs::path d = proc_ / std::to_string(pid);
    std::error_code ec;
    if (!fs::exists(d, ec)) continue;
    std::set<std::string> shm;
    for (const auto& e : fs::directory_iterator(d / "fd", ec)) {
      std::error_code lec;
      std::string t = fs::read_symlink(e.path(), lec).string();
      if (lec) continue;
      if (starts_with(t, "socket:[") && t.back() == ']') {
        if (auto ino = parse_number<unsigned long>(std::string_view(t).substr(8, t.size() - 9))) sockets[pid].insert(*ino);
      } else if (is_nccl_shm(strip_deleted(t))) {
        shm.insert(strip_deleted(t));
      }
    }
    if (auto maps = read_maps(d / "maps"))
      for (const MapsEntry& m : *maps)
        if (is_nccl_shm(m.path)) shm.insert(m.path);
    for (const auto& s : shm) {
      out[pid].evidence.push_back("nccl-shm " + s);
      out[pid].nccl = true;
    }
    // Socket tables of the process's network namespace (one read per namespace).
    std::error_code nec;
    std::string ns = fs::read_symlink(d / "ns" / "net", nec).string();
    if (nec || ns.empty()) ns = "pid:" + std::to_string(pid);
    if (!sockets[pid].empty() && tables_read.insert(ns).second) {
      for (const char* t : {"tcp", "tcp6"}) tcp.merge(parse_tcp_table(slurp(d / "net" / t)));
      unix_paths.merge(parse_unix_table(slurp(d / "net" / "unix")));
    }
  }
  // Endpoints "local|remote" -> owning pid, to find the other end of each connection.
  std::map<std::string, pid_t> owner;
  std::map<std::string, std::set<pid_t>> shm_users;
  for (const auto& [pid, f] : out)
    for (const auto& e : f.evidence)
      if (starts_with(e, "nccl-shm ")) shm_users[e.substr(9)].insert(pid);
  for (const auto& [seg, users] : shm_users)
    if (users.size() > 1)
      for (pid_t p : users) out[p].maybe_alone = false;
  for (const auto& [pid, inodes] : sockets)
    for (unsigned long ino : inodes)
      if (auto t = tcp.find(ino); t != tcp.end()) owner[t->second.first + "|" + t->second.second] = pid;
  for (const auto& [pid, inodes] : sockets) {
    std::set<std::string> named;
    for (unsigned long ino : inodes) {
      if (auto u = unix_paths.find(ino); u != unix_paths.end() && u->second.find("nccl") != std::string::npos)
        named.insert(u->second);
      auto t = tcp.find(ino);
      if (t == tcp.end()) continue;
      auto peer = owner.find(t->second.second + "|" + t->second.first);
      if (peer == owner.end()) {
        std::string remote = address_of(t->second.second);
        if (!loopback(remote) && remote != address_of(t->second.first))
          out[pid].remote_tcp.push_back(tcp_endpoint(t->second.second));
        continue;
      }
      if (peer->second == pid) continue;
      if (out[pid].tcp_peers.insert(peer->second).second)
        out[pid].evidence.push_back("tcp-peer " + tcp_endpoint(t->second.first) + " <-> " + tcp_endpoint(t->second.second) +
                                    " (pid " + std::to_string(peer->second) + ")");
    }
    for (const auto& n : named) {
      out[pid].evidence.push_back("nccl-unix " + n);
      out[pid].nccl = true;
      if (nccl_socket_rank(n) > 0) out[pid].maybe_alone = false;
    }
  }
  for (auto& [pid, f] : out) {
    if (!f.tcp_peers.empty() || !f.remote_tcp.empty()) f.maybe_alone = false;
    for (const auto& r : f.remote_tcp) f.evidence.push_back("tcp-remote " + r);
  }
  return out;
}

}  // namespace nvproxy::checkpoint
