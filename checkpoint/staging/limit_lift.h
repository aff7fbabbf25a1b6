// Memory limits raised for exactly as long as device memory lives in host memory (the CUDA
// driver's staging during a checkpoint or a restore), then put back. The original values are
// written to a record in the container's bundle before any limit is touched, so that a shim that
// dies with limits lifted leaves the means to put them back: the shim's `delete` (run by containerd
// after a shim died) and the next checkpoint or restore of the container do so from the record.
//
// Putting a limit back below what the cgroup uses would make the kernel reclaim and, on cgroup v2,
// OOM-kill: each is put back once the cgroup's usage (less reclaimable cache) is under it, waiting
// a bounded time for the driver to free its staging; a limit that still cannot go back stays
// lifted, in the record, with a warning (the container runs; the next put-back tries again).
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/staging/memory_limits.h"
#include "checkpoint/staging/staging_bill.h"
#include "common/log.h"

namespace nvproxy::checkpoint {

struct PutBack {
  std::vector<std::string> restored;  // "FILE: 6.0 GiB"
  std::vector<std::string> left;      // still lifted, and why
};

class LimitLift {
 public:
  LimitLift() = default;
  // Writes the record, then every change in order. A change that fails undoes those before it and
  // throws Error naming the file and the kernel's answer.
  LimitLift(MemoryProbe& probe, std::vector<LimitChange> changes, std::filesystem::path record, Logger& log, std::string who,
            std::chrono::milliseconds settle = std::chrono::seconds(30));
  LimitLift(LimitLift&&) noexcept;
  LimitLift& operator=(LimitLift&&) noexcept;
  LimitLift(const LimitLift&) = delete;
  LimitLift& operator=(const LimitLift&) = delete;
  ~LimitLift() { put_back(); }

  // Puts every limit back (reverse order) and removes the record once none is left lifted; logs
  // what it did and how long the limits were lifted. Idempotent.
  PutBack put_back() noexcept;
  [[nodiscard]] bool active() const { return probe_ != nullptr; }

 private:
  MemoryProbe* probe_ = nullptr;
  std::vector<LimitChange> changes_;
  std::filesystem::path record_;
  Logger* log_ = nullptr;
  std::string who_;
  std::chrono::milliseconds settle_{};
  std::chrono::steady_clock::time_point since_;
};

// Puts back what a record left by an earlier shim names (no record: nothing). Never throws.
PutBack put_back_recorded(MemoryProbe& probe, const std::filesystem::path& record, Logger& log, const std::string& who,
                          std::chrono::milliseconds settle = std::chrono::seconds(5));

// The record's name in the bundle.
inline constexpr const char* kLiftRecordFile = "nvproxy-lifted-limits.json";

}  // namespace nvproxy::checkpoint
