// Which CUDA processes of a container talk to each other as ranks of a collective (NCCL): the driver
// checkpoints such ranks but refuses to restore them (error 801 on 2x H200, driver 580), which would
// strand the workload, so the orchestrator's preflight asks this before toggling anything.
//
// Signals read from /proc (see test/gpu/README.md for what was measured on the GPU machine):
//   nccl-shm   an fd or mapping of a /dev/shm/nccl-* segment (NCCL's shared-memory transport/proxy)
//   nccl-unix  a unix socket bound to a name containing "nccl" (NCCL's IPC sockets for cuMem handles)
//   tcp-peer   an established TCP connection whose other end is another of the given processes
//              (NCCL's bootstrap ring, torch.distributed's TCPStore)
// The first two name NCCL itself; tcp-peer only says that two CUDA processes are connected, so the
// orchestrator refuses on it only when the two use different GPUs.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace nvproxy::checkpoint {

struct CommFinding {
  std::vector<std::string> evidence;  // "nccl-shm /dev/shm/nccl-AbC123", "tcp-peer 127.0.0.1:29511 <-> pid 77", ...
  std::set<pid_t> tcp_peers;          // other given pids connected to this one by TCP
  bool nccl = false;                  // a NCCL-specific signal (nccl-shm or nccl-unix)
  // Whether it can be the only rank of its group: NCCL's signals are there for a group of one too
  // (its unix socket @tmp/nccl-socket-<rank>-<hash>). False on anything that says there are others:
  // a rank number above 0, a NCCL shared-memory segment another given pid has too, a TCP connection
  // to another given pid or to another host.
  bool maybe_alone = true;
  std::vector<std::string> remote_tcp;  // "10.0.0.2:29500": established connections to other hosts
};

class CommProbe {
 public:
  virtual ~CommProbe() = default;
  // Findings for the given pids (pids without any signal are absent). Vanished pids are skipped.
  virtual std::map<pid_t, CommFinding> scan(const std::vector<pid_t>& pids) = 0;
};

class ProcCommProbe final : public CommProbe {
 public:
  explicit ProcCommProbe(std::filesystem::path proc_root = "/proc") : proc_(std::move(proc_root)) {}
  std::map<pid_t, CommFinding> scan(const std::vector<pid_t>& pids) override;

 private:
  std::filesystem::path proc_;
};

// Parses one /proc/net/tcp or tcp6 table: socket inode -> "local|remote" of established sockets.
std::map<unsigned long, std::pair<std::string, std::string>> parse_tcp_table(const std::string& text);
// Parses /proc/net/unix: socket inode -> bound path ("@name" for abstract ones); unbound ones absent.
std::map<unsigned long, std::string> parse_unix_table(const std::string& text);
// "0100007F:1F97" -> "127.0.0.1:8087"; IPv6 (32 hex digits) -> "[hex]:port".
std::string tcp_endpoint(const std::string& hex);

}  // namespace nvproxy::checkpoint
