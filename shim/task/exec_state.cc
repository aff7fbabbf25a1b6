#include "shim/task/exec_state.h"

#include "common/error.h"

namespace nvproxy::shim {

namespace {

class Created final : public ExecState {
 public:
  [[nodiscard]] ProcStatus status() const override { return ProcStatus::Created; }
  [[nodiscard]] const char* name() const override { return "created"; }
  const ExecState& start(ExecOps& ops) const override {
    ops.run_exec();
    return running();
  }
  // Never started: deleting it only forgets it.
  const ExecState& remove(ExecOps&) const override { return deleted(); }
  const ExecState& kill(ExecOps& ops, int) const override {
    refuse(ops, "signal it before it started", Code::FailedPrecondition);
  }
};

class Running final : public ExecState {
 public:
  [[nodiscard]] ProcStatus status() const override { return ProcStatus::Running; }
  [[nodiscard]] const char* name() const override { return "running"; }
  const ExecState& kill(ExecOps& ops, int signal) const override {
    ops.send_signal(signal);
    return *this;
  }
};

class Stopped final : public ExecState {
 public:
  [[nodiscard]] ProcStatus status() const override { return ProcStatus::Stopped; }
  [[nodiscard]] const char* name() const override { return "stopped"; }
  const ExecState& kill(ExecOps& ops, int) const override {
    throw Error(Code::NotFound, ops.describe() + ": process already finished");
  }
  const ExecState& remove(ExecOps&) const override { return deleted(); }
  [[nodiscard]] const ExecState& exited() const override { return *this; }
  void check_resize(const ExecOps& ops) const override { refuse(ops, "resize its terminal"); }
};

class Deleted final : public ExecState {
 public:
  [[nodiscard]] ProcStatus status() const override { return ProcStatus::Deleted; }
  [[nodiscard]] const char* name() const override { return "deleted"; }
  [[nodiscard]] const ExecState& exited() const override { return *this; }
};

}  // namespace

void ExecState::refuse(const ExecOps& ops, const char* what, Code code) const {
  throw Error(code, ops.describe() + " is " + name() + ": cannot " + what);
}

const ExecState& ExecState::start(ExecOps& ops) const {
  refuse(ops, "start it again");
}
const ExecState& ExecState::kill(ExecOps& ops, int) const {
  refuse(ops, "signal it");
}
const ExecState& ExecState::remove(ExecOps& ops) const {
  refuse(ops, "delete it while it runs", Code::FailedPrecondition);
}
const ExecState& ExecState::exited() const {
  return stopped();
}

const ExecState& ExecState::created() {
  static const Created s;
  return s;
}
const ExecState& ExecState::running() {
  static const Running s;
  return s;
}
const ExecState& ExecState::stopped() {
  static const Stopped s;
  return s;
}
const ExecState& ExecState::deleted() {
  static const Deleted s;
  return s;
}

}  // namespace nvproxy::shim
