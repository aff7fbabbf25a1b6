// An exec: a process the runtime starts in the running container (runtime exec), with its own
// states (exec_state.h). Its exit goes out before the init's (the init holds its own back while
// execs run), and a Start waits for the container's operations (op_mu); Kill, ResizePty and Delete
// do not, as in containerd's runc shim.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "common/error.h"
#include "shim/task/exec_state.h"
#include "shim/task/process.h"

namespace nvproxy::shim {

class InitProcess;
class ExecTable;

class ExecProcess final : public Process, private ExecOps {
 public:
  // `init` and `table`: the container's, which outlive every call but wait() and exit().
  ExecProcess(TaskContext& ctx, InitProcess& init, ExecTable& table, std::string exec_id, StdioPaths stdio, nlohmann::json spec)
      : Process(ctx, std::move(exec_id), std::move(stdio)), init_(init), table_(table), spec_(std::move(spec)) {}

  // The answer for an exec id the container does not know.
  static Error not_found(const std::string& container_id, const std::string& exec_id);

  [[nodiscard]] ProcStatus status() const override;
  pid_t start() override;
  void kill(int signal, bool all) override;
  void resize(unsigned width, unsigned height) override;
  void remove() override;

  // ctx.mu held: whether its exit is still to come while it runs (ExecTable::running_locked).
  [[nodiscard]] bool running_locked() const;

 private:
  void exited_locked(ExitInfo e) override;
  // ctx.mu held. Deleted means out of the container's table: a caller that found it just before
  // answers as the table answers now.
  void check_listed_locked() const;

  // ExecOps
  [[nodiscard]] std::string describe() const override;
  void run_exec() override;
  void send_signal(int signal) override;

  InitProcess& init_;
  ExecTable& table_;
  const nlohmann::json spec_;
  const ExecState* state_ = &ExecState::created();  // guarded by ctx.mu
};

}  // namespace nvproxy::shim
