// Which processes belong to a container. The orchestrator asks a ProcessLister (supplied by the shim)
// each time it needs the list, because pids change: after a CRIU restore every host pid is new.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "common/process.h"

namespace nvproxy::checkpoint {

class ProcessLister {
 public:
  virtual ~ProcessLister() = default;
  // Host pids of every process in the container, sorted, no duplicates. Throws Error.
  virtual std::vector<pid_t> list() = 0;
};

// A fixed list, or whatever a function returns (tests, the runsc path, the diagnose --pid option).
class FunctionLister final : public ProcessLister {
 public:
  explicit FunctionLister(std::function<std::vector<pid_t>()> fn) : fn_(std::move(fn)) {}
  explicit FunctionLister(std::vector<pid_t> pids) : fn_([pids] { return pids; }) {}
  std::vector<pid_t> list() override;

 private:
  std::function<std::vector<pid_t>()> fn_;
};

}  // namespace nvproxy::checkpoint
