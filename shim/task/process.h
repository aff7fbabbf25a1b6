// What the init process and an exec share: stdio, pid, exit, and waiting for the exit. Their
// lifecycles differ and live in InitProcess (init_state.h) and ExecProcess (exec_process.h).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "shim/task/console.h"
#include "shim/task/process_io.h"

namespace nvproxy::shim {

enum class ProcStatus { Created, Running, Paused, Stopped, Deleted };

struct ExitInfo {
  uint32_t status = 0;
  std::chrono::system_clock::time_point at;
};

class Container;

class Process {
 public:
  Process(std::string exec_id, StdioPaths stdio) : exec_id_(std::move(exec_id)), stdio_(std::move(stdio)) {}
  virtual ~Process() = default;
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  [[nodiscard]] const std::string& exec_id() const { return exec_id_; }
  [[nodiscard]] bool is_init() const { return exec_id_.empty(); }
  [[nodiscard]] const StdioPaths& stdio() const { return stdio_; }

  [[nodiscard]] pid_t pid() const;
  void set_pid(pid_t pid);
  [[nodiscard]] std::optional<ExitInfo> exit() const;
  // Records the exit and wakes every waiter; the first exit wins.
  void set_exit(ExitInfo e);
  // Blocks until the process has exited.
  ExitInfo wait() const;
  // How many callers are blocked in wait() (diagnostics and tests).
  [[nodiscard]] int waiters() const;

  // The IO belongs to the process; set while it starts, used by CloseIO, ResizePty and Delete.
  void set_io(std::unique_ptr<ProcessIO> io) { io_ = std::move(io); }
  void set_console(std::unique_ptr<ConsoleIO> c) { console_ = std::move(c); }
  ProcessIO* io() { return io_.get(); }
  void close_stdin();
  void resize(unsigned width, unsigned height);
  // Waits (bounded) until the output reached the client, then releases the IO.
  void finish_io(std::chrono::milliseconds timeout);

 private:
  friend class Container;
  // Guarded by the owning container's lock: an exit that arrives while the process is starting is
  // held until its start event is out, so that clients never see an exit before the start.
  bool starting_ = false;
  std::optional<int> held_exit_;

  const std::string exec_id_;
  const StdioPaths stdio_;
  std::unique_ptr<ProcessIO> io_;
  std::unique_ptr<ConsoleIO> console_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  pid_t pid_ = 0;
  std::optional<ExitInfo> exit_;
  mutable int waiters_ = 0;
};

}  // namespace nvproxy::shim
