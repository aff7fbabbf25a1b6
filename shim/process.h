// One process of a container as the shim tracks it: the init process or an exec.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "shim/console.h"
#include "shim/stdio.h"

namespace nvproxy::shim {

enum class ProcStatus { Created, Running, Paused, Stopped };

struct ExitInfo {
  uint32_t status = 0;
  std::chrono::system_clock::time_point at;
};

struct Process {
  std::string exec_id;  // empty for init
  StdioPaths stdio;
  std::unique_ptr<PipeIO> io;          // without a terminal
  std::unique_ptr<ConsoleIO> console;  // with a terminal (pty master from the runtime)
  nlohmann::json spec;                 // exec: the OCI process spec
  pid_t pid = 0;
  ProcStatus status = ProcStatus::Created;
  std::optional<ExitInfo> exit;

  [[nodiscard]] bool is_init() const { return exec_id.empty(); }
  // Waits (bounded) until the process's output reached the client.
  void drain_output(std::chrono::milliseconds timeout) const {
    if (io) io->wait_output(timeout);
    if (console) console->wait_output(timeout);
  }
};

}  // namespace nvproxy::shim
