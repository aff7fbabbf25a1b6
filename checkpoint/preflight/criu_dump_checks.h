// What CRIU cannot dump, or cannot run without, found before any CUDA process is toggled (each a
// SnapshotCheck for runc and crun; runsc has no CRIU). Found only after the toggles, each cost a
// rollback, and the error quoted a CRIU line that did not name the cause.
//
//   io_uring     an io_uring instance (an fd or a mapping of its rings): CRIU 4.2 has no dumper for
//                it ("Unknown file type"). libuv (PyTorch's TCPStore, Node.js) creates one by itself.
//   tcp          an established TCP connection, when CRIU is not asked to dump them (tcp-established:
//                containerd's CheckpointOptions.OpenTcp, or checkpoint.criu_options): "Connected TCP
//                socket, consider using --tcp-established option"; a TCPStore's connection to
//                itself in a single-GPU torch.distributed job is one.
//   network lock a container with a network namespace of its own has its network locked by CRIU
//                during the dump with iptables-restore (its default method), and so has each
//                established TCP connection it dumps (tcp-established), on the host's network too:
//                without that program in CRIU's PATH every such dump fails (`execvp("iptables-restore")
//                failed`, "Iptables configuration failed").
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/preflight/snapshot_check.h"

namespace nvproxy::checkpoint {

struct IoUringUse {
  pid_t pid = 0;
  std::string name;       // comm
  std::vector<int> fds;   // fds of io_uring instances
  unsigned mappings = 0;  // mappings of io_uring rings (kept after the fd is closed)
};
std::vector<IoUringUse> io_uring_users(const std::vector<pid_t>& pids, const std::filesystem::path& proc = "/proc");

class IoUringCheck final : public SnapshotCheck {
 public:
  explicit IoUringCheck(std::filesystem::path proc = "/proc") : proc_(std::move(proc)) {}
  std::optional<SnapshotProblem> check(const std::vector<pid_t>& pids) override;

 private:
  std::filesystem::path proc_;
};

class TcpEstablishedCheck final : public SnapshotCheck {
 public:
  // allowed: the snapshot dumps established connections (the request's or the options' tcp-established).
  TcpEstablishedCheck(bool allowed, std::filesystem::path proc = "/proc") : allowed_(allowed), proc_(std::move(proc)) {}
  std::optional<SnapshotProblem> check(const std::vector<pid_t>& pids) override;

 private:
  bool allowed_;
  std::filesystem::path proc_;
};

// Whether CRIU options (checkpoint.criu_options lines) hold `name` ("tcp-established").
bool has_criu_option(const std::vector<std::string>& options, const std::string& name);

class NetworkLockCheck final : public SnapshotCheck {
 public:
  // criu_options: checkpoint.criu_options (a "network-lock" line there is the operator's choice);
  // path: where CRIU looks for programs (the shim's $PATH, which runc hands down).
  // tcp_established: the snapshot dumps established TCP connections.
  NetworkLockCheck(std::vector<std::string> criu_options, std::string path, bool tcp_established = false,
                   std::filesystem::path proc = "/proc")
      : options_(std::move(criu_options)), path_(std::move(path)), tcp_(tcp_established), proc_(std::move(proc)) {}
  std::optional<SnapshotProblem> check(const std::vector<pid_t>& pids) override;

 private:
  std::vector<std::string> options_;
  std::string path_;
  bool tcp_;
  std::filesystem::path proc_;
};

// The first problem of several checks, in order.
class SnapshotChecks final : public SnapshotCheck {
 public:
  void add(SnapshotCheck* c) { checks_.push_back(c); }
  std::optional<SnapshotProblem> check(const std::vector<pid_t>& pids) override {
    for (SnapshotCheck* c : checks_)
      if (auto p = c->check(pids)) return p;
    return std::nullopt;
  }

 private:
  std::vector<SnapshotCheck*> checks_;
};

}  // namespace nvproxy::checkpoint
