// The init process's lifecycle, one type per state (created, created from a checkpoint, running,
// paused, stopped, deleted), in the shape of containerd's runc shim. A state decides what is legal
// and which state follows; the work behind a transition (the runtime call) is InitOps's, done by
// InitProcess (init_process.h). Illegal requests fail naming the state, with the code containerd's
// runc shim answers (its state refusals are plain errors, which clients see as Unknown; deleting a
// running task is FailedPrecondition).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "common/error.h"
#include "oci/runtime_flavor.h"
#include "shim/task/process.h"

namespace nvproxy::shim {

class InitOps {
 public:
  virtual ~InitOps() = default;
  [[nodiscard]] virtual const std::string& container_id() const = 0;
  virtual void run_start() = 0;
  virtual void run_restore() = 0;  // runtime restore from the pending checkpoint, then CUDA back
  virtual void run_kill(int signal, bool all) = 0;
  virtual void run_pause() = 0;
  virtual void run_resume() = 0;
  virtual void run_checkpoint(const oci::CheckpointFlags& flags, bool paused) = 0;
  virtual void run_update(const nlohmann::json& resources) = 0;
  virtual void run_delete() = 0;
};

class InitState {
 public:
  virtual ~InitState() = default;
  [[nodiscard]] virtual ProcStatus status() const = 0;
  [[nodiscard]] virtual const char* name() const = 0;

  // Each does the work through `ops` and returns the state that follows, or throws.
  virtual const InitState& start(InitOps& ops) const;
  virtual const InitState& kill(InitOps& ops, int signal, bool all) const;
  virtual const InitState& pause(InitOps& ops) const;
  virtual const InitState& resume(InitOps& ops) const;
  virtual const InitState& checkpoint(InitOps& ops, const oci::CheckpointFlags& flags) const;
  virtual const InitState& update(InitOps& ops, const nlohmann::json& resources) const;
  virtual const InitState& remove(InitOps& ops) const;
  // The reaper saw the init exit.
  [[nodiscard]] virtual const InitState& exited() const;
  // Whether execs may be added and started.
  [[nodiscard]] virtual bool accepts_exec() const { return true; }

  static const InitState& created();
  static const InitState& created_checkpoint();
  static const InitState& running();
  static const InitState& paused();
  static const InitState& stopped();
  static const InitState& deleted();

 protected:
  [[noreturn]] void refuse(const InitOps& ops, const char* what, Code code = Code::Unknown) const;
};

}  // namespace nvproxy::shim
