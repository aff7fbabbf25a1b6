// A process's stdio without a terminal, in the shapes containerd's clients ask for through the
// stdout URI: FIFOs (no scheme, or fifo://), a file (file://: stdout and stderr appended to it),
// or a logging binary (binary:///path?arg=value: it reads stdout and stderr as fds 3 and 4 and
// reports readiness on fd 5). No paths at all means no stdio: /dev/null.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "oci/runtime.h"

namespace nvproxy {
class ProcessRunner;
}

namespace nvproxy::shim {

struct StdioPaths {
  std::string in, out, err;
  bool terminal = false;
  [[nodiscard]] bool null() const { return in.empty() && out.empty() && err.empty(); }
};

class ProcessIO {
 public:
  virtual ~ProcessIO() = default;
  // The ends the runtime's process gets; never -1 (the runtime must not inherit a pipe that the
  // shim reads until EOF: a detached container process would hold it forever).
  [[nodiscard]] virtual oci::Stdio child_stdio() const = 0;
  // After the runtime started the process: drop our copies of its ends, start copying.
  virtual void start_copying() = 0;
  // CloseIO: the process's stdin ends.
  virtual void close_stdin() = 0;
  // At Delete: waits (bounded) until the output reached its destination; false on timeout.
  virtual bool wait_output(std::chrono::milliseconds timeout) = 0;
  // Before a process's exit is published: waits (bounded) until what it wrote so far has been read
  // at the other end, not for the end of the stream (a background child may hold it open). A client
  // that learns of the exit stops opening its FIFOs, so output still waiting for it would be lost.
  // Streams whose reader is not a client's FIFO have nothing to wait for.
  virtual bool wait_flushed(std::chrono::milliseconds /*timeout*/) { return true; }
  // The process is known to have ended, but a writer of its output may outlive it (a runsc
  // sandbox holds the pipe ends it was given): the output ends by itself within `grace`, or else
  // what the pipes hold then is read and the client's ends are closed, so that its wait for the
  // output (containerd's client waits for it before Delete) returns. Once; no-op where the
  // reader is not the shim's copy.
  virtual void end_output(std::chrono::milliseconds /*grace*/) {}
};

struct IoOwner {
  std::string container_id;
  std::string ns;
  ProcessRunner* runner = nullptr;  // starts logging binaries (and reaps them)
  // The runc options' IoUid/IoGid: the pipes the process gets are theirs, so that a process in a
  // user namespace can reopen them (/dev/stdout, /proc/self/fd/N). 0 and 0: left as they are.
  uint32_t uid = 0, gid = 0;
};

// Throws Error (InvalidArgument for an unknown scheme, or naming the FIFO/file/binary that failed).
std::unique_ptr<ProcessIO> open_process_io(const StdioPaths& paths, const IoOwner& owner);

}  // namespace nvproxy::shim
