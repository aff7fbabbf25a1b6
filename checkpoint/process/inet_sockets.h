// The inet sockets (TCP and UDP, IPv4 and IPv6) that processes hold: each `socket:[INODE]` fd of
// /proc/PID/fd matched against the socket tables of the process's network namespace
// (/proc/PID/net/{tcp,tcp6,udp,udp6,udplite,udplite6}).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

namespace nvproxy::checkpoint {

struct InetSocket {
  pid_t pid = 0;
  int fd = -1;
  std::string proto;  // tcp, tcp6, udp, ...
  std::string local;  // "0.0.0.0:8080", "[::]:8080"
  bool listening = false;
  unsigned long inode = 0;
};

// Processes that are gone or unreadable are skipped.
std::vector<InetSocket> inet_sockets(const std::vector<pid_t>& pids, const std::filesystem::path& proc = "/proc");

// "0100007F:1F90" -> "127.0.0.1:8080"; IPv6 as "[hex]:port" ("::" for all-zero).
std::string inet_address(const std::string& hex, bool v6);

}  // namespace nvproxy::checkpoint
