#include "shim/task/init_state.h"

#include "common/error.h"

namespace nvproxy::shim {

namespace {

class Created final : public InitState {
 public:
  [[nodiscard]] ProcStatus status() const override { return ProcStatus::Created; }
  [[nodiscard]] const char* name() const override { return "created"; }
  const InitState& start(InitOps& ops) const override {
    ops.run_start();
    return running();
  }
  const InitState& kill(InitOps& ops, int signal, bool all) const override {
    ops.run_kill(signal, all);
    return *this;
  }
  const InitState& update(InitOps& ops, const nlohmann::json& r) const override {
    ops.run_update(r);
    return *this;
  }
  const InitState& remove(InitOps& ops) const override {
    ops.run_delete();
    return deleted();
  }
};

// Create with a checkpoint: the runtime restore runs at Start (as in containerd's runc shim).
// Nothing runs yet, so there is nothing to signal, pause or update.
class CreatedCheckpoint final : public InitState {
 public:
  [[nodiscard]] ProcStatus status() const override { return ProcStatus::Created; }
  [[nodiscard]] const char* name() const override { return "created (restore pending)"; }
  const InitState& start(InitOps& ops) const override {
    ops.run_restore();
    return running();
  }
  // The runtime knows no such container yet: the runc shim's kill answers NotFound here.
  const InitState& kill(InitOps& ops, int, bool) const override { refuse(ops, "signal it: nothing runs yet", Code::NotFound); }
  const InitState& remove(InitOps& ops) const override {
    ops.run_delete();
    return deleted();
  }
  [[nodiscard]] bool accepts_exec() const override { return false; }
};

class Running final : public InitState {
 public:
  [[nodiscard]] ProcStatus status() const override { return ProcStatus::Running; }
  [[nodiscard]] const char* name() const override { return "running"; }
  const InitState& kill(InitOps& ops, int signal, bool all) const override {
    ops.run_kill(signal, all);
    return *this;
  }
  const InitState& pause(InitOps& ops) const override {
    ops.run_pause();
    return paused();
  }
  const InitState& checkpoint(InitOps& ops, const oci::CheckpointFlags& f) const override {
    ops.run_checkpoint(f, false);
    return *this;  // exit=true: the runtime ends the container; the reaper brings the stop
  }
  const InitState& update(InitOps& ops, const nlohmann::json& r) const override {
    ops.run_update(r);
    return *this;
  }
};

class Paused final : public InitState {
 public:
  [[nodiscard]] ProcStatus status() const override { return ProcStatus::Paused; }
  [[nodiscard]] const char* name() const override { return "paused"; }
  [[nodiscard]] bool accepts_exec() const override { return false; }
  const InitState& kill(InitOps& ops, int signal, bool all) const override {
    ops.run_kill(signal, all);
    return *this;
  }
  const InitState& resume(InitOps& ops) const override {
    ops.run_resume();
    return running();
  }
  const InitState& checkpoint(InitOps& ops, const oci::CheckpointFlags& f) const override {
    ops.run_checkpoint(f, true);
    return *this;
  }
  const InitState& update(InitOps& ops, const nlohmann::json& r) const override {
    ops.run_update(r);
    return *this;
  }
};

class Stopped final : public InitState {
 public:
  [[nodiscard]] ProcStatus status() const override { return ProcStatus::Stopped; }
  [[nodiscard]] const char* name() const override { return "stopped"; }
  // With `all`, a kill still reaches processes that outlived init (host pid namespace).
  const InitState& kill(InitOps& ops, int signal, bool all) const override {
    if (!all) throw Error(Code::NotFound, "container \"" + ops.container_id() + "\": process already finished");
    try {
      ops.run_kill(signal, all);
    } catch (const Error&) {
      throw Error(Code::NotFound, "container \"" + ops.container_id() + "\": process already finished");
    }
    return *this;
  }
  const InitState& remove(InitOps& ops) const override {
    ops.run_delete();
    return deleted();
  }
  [[nodiscard]] const InitState& exited() const override { return *this; }
  [[nodiscard]] bool accepts_exec() const override { return false; }
};

class Deleted final : public InitState {
 public:
  [[nodiscard]] ProcStatus status() const override { return ProcStatus::Deleted; }
  [[nodiscard]] const char* name() const override { return "deleted"; }
  [[nodiscard]] const InitState& exited() const override { return *this; }
  [[nodiscard]] bool accepts_exec() const override { return false; }
};

}  // namespace

void InitState::refuse(const InitOps& ops, const char* what, Code code) const {
  throw Error(code, "container \"" + ops.container_id() + "\" is " + name() + ": cannot " + what);
}

const InitState& InitState::start(InitOps& ops) const {
  refuse(ops, "start");
}
const InitState& InitState::kill(InitOps& ops, int, bool) const {
  refuse(ops, "signal it");
}
const InitState& InitState::pause(InitOps& ops) const {
  refuse(ops, "pause");
}
const InitState& InitState::resume(InitOps& ops) const {
  refuse(ops, "resume");
}
const InitState& InitState::checkpoint(InitOps& ops, const oci::CheckpointFlags&) const {
  refuse(ops, "checkpoint");
}
const InitState& InitState::update(InitOps& ops, const nlohmann::json&) const {
  refuse(ops, "update resources");
}
const InitState& InitState::remove(InitOps& ops) const {
  refuse(ops, "delete while it runs; kill it first", Code::FailedPrecondition);
}
const InitState& InitState::exited() const {
  return stopped();
}

const InitState& InitState::created() {
  static const Created s;
  return s;
}
const InitState& InitState::created_checkpoint() {
  static const CreatedCheckpoint s;
  return s;
}
const InitState& InitState::running() {
  static const Running s;
  return s;
}
const InitState& InitState::paused() {
  static const Paused s;
  return s;
}
const InitState& InitState::stopped() {
  static const Stopped s;
  return s;
}
const InitState& InitState::deleted() {
  static const Deleted s;
  return s;
}

}  // namespace nvproxy::shim
