#include "shim/task/exec_process.h"

#include <signal.h>

#include "common/fs.h"
#include "shim/task/exec_table.h"
#include "shim/task/init_process.h"
#include "shim/task/task_context.h"

namespace nvproxy::shim {

Error ExecProcess::not_found(const std::string& container_id, const std::string& exec_id) {
  return Error(Code::NotFound, "exec \"" + exec_id + "\" of container \"" + container_id + "\" not found");
}

void ExecProcess::check_listed_locked() const {
  if (state_ == &ExecState::deleted()) throw not_found(ctx_.setup.id, exec_id());
}

ProcStatus ExecProcess::status() const {
  std::lock_guard lk(ctx_.mu);
  check_listed_locked();
  return state_->status();
}

bool ExecProcess::running_locked() const {
  return state_ == &ExecState::running() && !exit();
}

pid_t ExecProcess::start() {
  std::lock_guard op(ctx_.op_mu);
  const ExecState* from;
  {
    std::lock_guard lk(ctx_.mu);
    check_listed_locked();
    from = state_;
    if (from == &ExecState::created()) init_.check_accepts_exec_locked("start exec \"" + exec_id() + "\"");
    begin_start_locked();
  }
  try {
    const ExecState& to = from->start(*this);
    std::lock_guard lk(ctx_.mu);
    if (state_ == from) state_ = &to;
  } catch (...) {
    finish_start(nullptr);
    // Nothing will ever exit: release its waiters with status 0 and no exit time, as
    // containerd's runc shim does for an exec whose start failed.
    if (!exit()) set_exit(ExitInfo{0, {}});
    throw;
  }
  finish_start([&] { ctx_.events.exec_started(exec_id(), pid()); });
  return pid();
}

void ExecProcess::kill(int signal, bool /*all*/) {
  const ExecState* st;
  {
    std::lock_guard lk(ctx_.mu);
    check_listed_locked();
    st = state_;
  }
  st->kill(*this, signal);
}

void ExecProcess::resize(unsigned width, unsigned height) {
  {
    std::lock_guard lk(ctx_.mu);
    check_listed_locked();
    state_->check_resize(*this);
  }
  resize_terminal(width, height);
}

void ExecProcess::remove() {
  {
    std::lock_guard lk(ctx_.mu);
    check_listed_locked();
    state_ = &state_->remove(*this);
    table_.erase_locked(exec_id());
  }
  if (pid_t pid = this->pid(); pid > 0) ctx_.env.exits.forget(pid);
  drain_io();
}

void ExecProcess::exited_locked(ExitInfo e) {
  state_ = &state_->exited();
  set_exit(e);
  ctx_.events.exited(exec_id(), pid(), e);
  init_.exec_exited_locked();
}

// ExecOps: the work behind the exec's transitions.

std::string ExecProcess::describe() const {
  return "exec \"" + exec_id() + "\" of container \"" + ctx_.setup.id + "\"";
}

void ExecProcess::run_exec() {
  const auto& bundle = ctx_.setup.bundle;
  auto spec_file = bundle / ("exec-" + exec_id() + ".json");
  auto pid_file = bundle / ("exec-" + exec_id() + ".pid");
  write_file_atomic(spec_file, spec_.dump(), 0600);
  // Both files are only the runtime's input and output: gone however the exec ends.
  struct Cleanup {
    std::filesystem::path spec, pid;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove(spec, ec);
      std::filesystem::remove(pid, ec);
    }
  } cleanup{spec_file, pid_file};
  launch(pid_file, [&](const std::string& console, const oci::Stdio& stdio) {
    ctx_.runtime->exec(ctx_.setup.id,
                       {.process_json = spec_file, .pid_file = pid_file, .console_socket = console, .stdio = stdio});
  });
}

void ExecProcess::send_signal(int signal) {
  pid_t pid = this->pid();
  if (pid <= 0) throw Error(Code::NotFound, describe() + " has no process");
  if (::kill(pid, signal) < 0) throw sys_error("kill " + describe() + " pid " + std::to_string(pid));
}

}  // namespace nvproxy::shim
