// An exec's lifecycle, one type per state (created, running, stopped, deleted). The work behind a
// transition (runtime exec, the signal) is ExecOps's, done by ExecProcess (exec_process.h).
#pragma once

#include <string>

#include "common/error.h"
#include "shim/task/process.h"

namespace nvproxy::shim {

class ExecOps {
 public:
  virtual ~ExecOps() = default;
  [[nodiscard]] virtual std::string describe() const = 0;  // "exec \"e1\" of container \"c\""
  virtual void run_exec() = 0;
  virtual void send_signal(int signal) = 0;
};

class ExecState {
 public:
  virtual ~ExecState() = default;
  [[nodiscard]] virtual ProcStatus status() const = 0;
  [[nodiscard]] virtual const char* name() const = 0;
  virtual const ExecState& start(ExecOps& ops) const;
  virtual const ExecState& kill(ExecOps& ops, int signal) const;
  // Delete: legal once it cannot run any more.
  virtual const ExecState& remove(ExecOps& ops) const;
  // ResizePty is refused once the exec has stopped (the runc shim's answer).
  virtual void check_resize(const ExecOps& /*ops*/) const {}
  [[nodiscard]] virtual const ExecState& exited() const;

  static const ExecState& created();
  static const ExecState& running();
  static const ExecState& stopped();
  static const ExecState& deleted();

 protected:
  [[noreturn]] void refuse(const ExecOps& ops, const char* what, Code code = Code::Unknown) const;
};

}  // namespace nvproxy::shim
