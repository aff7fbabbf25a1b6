// One process of a container as the task RPCs see it: the init (init_process.h) or an exec
// (exec_process.h) behind one interface, so that the container dispatches by exec id and never
// asks which kind it has. What both share lives here too: stdio, pid, exit and waiting for it,
// the launch through the runtime, and holding an exit back until the start event is out.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "oci/runtime.h"
#include "shim/task/console.h"
#include "shim/task/process_io.h"

namespace nvproxy::shim {

enum class ProcStatus { Created, Running, Paused, Stopped, Deleted };

struct ExitInfo {
  uint32_t status = 0;
  std::chrono::system_clock::time_point at;
};

struct TaskContext;

class Process : public std::enable_shared_from_this<Process> {
 public:
  virtual ~Process() = default;
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  [[nodiscard]] const std::string& exec_id() const { return exec_id_; }
  [[nodiscard]] const StdioPaths& stdio() const { return stdio_; }

  // The lifecycle, per kind. Each takes the container's locks as container.h says.
  [[nodiscard]] virtual ProcStatus status() const = 0;
  virtual pid_t start() = 0;
  // `all`: every process of the container (the init only; an exec signals its own pid).
  virtual void kill(int signal, bool all) = 0;
  virtual void resize(unsigned width, unsigned height) = 0;
  // Delete: legal once it cannot run any more; afterwards exit() is set for the init.
  virtual void remove() = 0;

  [[nodiscard]] pid_t pid() const;
  [[nodiscard]] std::optional<ExitInfo> exit() const;
  // Blocks until the process has exited.
  ExitInfo wait() const;
  // How many callers are blocked in wait() (diagnostics and tests).
  [[nodiscard]] int waiters() const;
  void close_stdin();

  // The reaper saw its pid exit (through the exit book; the container is alive meanwhile).
  void on_exit(int wait_status);

 protected:
  using RuntimeCall = std::function<void(const std::string& console_socket, const oci::Stdio& stdio)>;
  static constexpr std::chrono::seconds kIoDrainTimeout{2};
  // A client that never reads (`ctr run -d`) delays an exit by this much at most.
  static constexpr std::chrono::seconds kExitFlushLimit{1};

  Process(TaskContext& ctx, std::string exec_id, StdioPaths stdio)
      : ctx_(ctx), exec_id_(std::move(exec_id)), stdio_(std::move(stdio)) {}

  // Records the exit and wakes every waiter; the first exit wins.
  void set_exit(ExitInfo e);
  // Runs `runtime_call` with the process's IO (console socket when it has a terminal), reads the
  // pid file and claims the pid in the exit book (an exit that came first is handled at once).
  void launch(const std::filesystem::path& pid_file, const RuntimeCall& runtime_call);
  // ctx.mu held: from now until finish_start, an exit is held back.
  void begin_start_locked() { starting_ = true; }
  // Ends the start: publishes via `publish_start` (ctx.mu held), then handles an exit that came
  // meanwhile, so that clients never see an exit before the start.
  void finish_start(const std::function<void()>& publish_start);
  // ctx.mu held: the exit, once, when no start holds it back.
  virtual void exited_locked(ExitInfo e) = 0;
  // The reaper saw the exit; runs before ctx.mu is taken and anything is published.
  virtual void before_exit() {}
  void resize_terminal(unsigned width, unsigned height);
  // Waits (bounded) until the output reached the client.
  void drain_io();
  // The process ended while a writer of its output pipes may live on: they end within `grace`
  // (ProcessIO::end_output). A terminal's output is left to end by itself.
  void end_output(std::chrono::milliseconds grace);

  TaskContext& ctx_;

 private:
  // Guarded by ctx_.mu.
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
