// The bill of a checkpoint's (or a restore's) staging, asked before anything is toggled: what the
// driver will stage of each CUDA process's device memory in host memory, against the headroom of
// every memory limit over the container and the host's available memory less what other
// checkpoints and restores in flight have reserved (host_reservations.h). The plan says which
// limits to lift for the staging's time, or why the checkpoint is refused. Plain policy: no I/O.
//
// A driver that stages nothing in the process (CUDA 13.4's custom storage: the caller copies
// device memory to buffers of its own) bills 0 per process, and the plan then lifts nothing.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "checkpoint/config.h"
#include "checkpoint/staging/memory_limits.h"

namespace nvproxy::checkpoint {

StagingMode parse_staging_mode(const std::string& text);  // throws Error(InvalidArgument)
std::string to_string(StagingMode m);

struct StagingBill {
  std::map<pid_t, std::uint64_t> staged;  // per CUDA process: device memory staged in its memory
  // The staging is a sandbox's as one: `staged` holds it under the sandbox's host pid (a gVisor
  // sentry, whose memory file is every sandboxed process's memory), or kSandboxToCome on restore.
  bool in_sandbox = false;
  // A restore's sandbox: its sentry, which will hold the staging, does not run yet.
  static constexpr pid_t kSandboxToCome = 0;
  std::vector<MemoryLimit> limits;       // over the container, nearest first
  std::uint64_t host_available = 0;      // MemAvailable
  std::uint64_t reserved_by_others = 0;  // other checkpoints and restores in flight on this host
  std::vector<std::string> others;       // who holds that ("container \"x\" 12.0 GiB")
  std::uint64_t margin = 0;              // kept free beyond the staging at every level
  // What the processes bring besides the staging and no usage counts yet: on restore, the rest of
  // the image's pages, which CRIU writes into a cgroup that is new (0 on checkpoint: in the usage).
  std::uint64_t resident = 0;

  [[nodiscard]] std::uint64_t total() const;
  [[nodiscard]] std::uint64_t need() const { return total() + resident + margin; }
};

struct LimitChange {
  std::filesystem::path file;
  std::uint64_t from = 0, to = 0;
  std::filesystem::path cgroup;  // whose usage must fall back below `from` before it is put back
  // Already at `to` when the lift starts: a restored container's own limit, raised in its spec so
  // that the runtime creates its cgroup lifted; only put back.
  bool preset = false;
};

struct StagingPlan {
  bool refused = false;
  std::string reason;              // refused: the figures
  std::vector<LimitChange> lifts;  // in the order to apply (a v1 memsw limit before its limit)
  std::uint64_t reserve = 0;       // to take in the host's reservations
  nlohmann::json json;             // the report's "staging" object
};

// `what`: "checkpoint" or "restore", for the reason's words.
StagingPlan plan_staging(const StagingBill& bill, StagingMode mode, const std::string& what);

// The report's "staging" object (StagingPlan::json) for a person: what is staged, the host's room
// and each limit's headroom, and what would be lifted. Empty when nothing is staged.
std::string staging_text(const nlohmann::json& staging);

// "the processes' memory (pid 913: 10.0 GiB, pid 914: 1.0 GiB)", or for a sandbox "the sandbox's
// memory (host pid 4711: 10.0 GiB)".
std::string staged_text(const std::map<pid_t, std::uint64_t>& staged, bool in_sandbox = false);

}  // namespace nvproxy::checkpoint
