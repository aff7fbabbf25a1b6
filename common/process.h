// Running other programs (runc, runsc, cuda-checkpoint, mount helpers) with captured output.
//
// Who reaps a child is pluggable: a plain CLI uses DirectWaiter (waitpid on the pid), while the shim,
// a child subreaper that reaps everything with waitpid(-1), provides its own ChildWaiter so a
// runtime command's exit is handed to the code that started it instead of being lost to the reaper.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"

namespace nvproxy {

struct Command {
  std::vector<std::string> argv;
  std::vector<std::string> env_add;       // "KEY=VALUE", added to (and overriding) the caller's environment
  std::string cwd;                        // empty: inherit
  std::optional<std::string> stdin_data;  // written to the child's stdin, then closed
  // Borrowed fds for the child's stdio; -1 means: stdin /dev/null (unless stdin_data), stdout and
  // stderr captured into RunResult.
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  std::vector<int> extra_fds;  // become fds 3, 4, ... in the child
  bool new_session = false;
  // The child leads a process group of its own (setpgid), so that a timeout kills everything it
  // started that stayed in the group (runc and the CRIU under it), not just the child.
  bool new_process_group = false;
  // 0: none; on expiry the child (its whole group with new_process_group or new_session) gets
  // SIGKILL, reading stops and the child is reaped.
  std::chrono::milliseconds timeout{0};
};

struct RunResult {
  int exit_code = -1;   // -1 when killed by a signal
  int term_signal = 0;  // the signal that ended it, 0 if it exited
  bool timed_out = false;
  pid_t pid = 0;          // the child's pid (with new_process_group or new_session also its group id)
  pid_t killed_pgid = 0;  // on timeout: the process group that got SIGKILL (0: only the child was killed)
  std::string out;
  std::string err;
  [[nodiscard]] bool ok() const { return exit_code == 0; }
  // "exit status 1: <stderr tail>" or "killed by signal 9"; for error messages.
  [[nodiscard]] std::string describe() const;
};

// A command (or a step built on one) that ran past its deadline and was killed; code DeadlineExceeded.
// what(): "<command> of <object> did not finish within <N> ms; <aftermath>", e.g. "runc checkpoint
// of container \"c1\" did not finish within 3000 ms; killed runc and CRIU (pgid 4242)".
class DeadlineError : public Error {
 public:
  DeadlineError(std::string command, std::string object, std::chrono::milliseconds timeout, pid_t pgid, std::string aftermath);
  [[nodiscard]] const std::string& command() const { return command_; }  // "runc checkpoint"
  [[nodiscard]] const std::string& object() const { return object_; }    // "container \"c1\""
  [[nodiscard]] std::chrono::milliseconds timeout() const { return timeout_; }
  [[nodiscard]] pid_t pgid() const { return pgid_; }                         // 0: none was killed
  [[nodiscard]] const std::string& aftermath() const { return aftermath_; }  // what was done about it
  // The same error with one more thing done about it ("container thawed").
  [[nodiscard]] DeadlineError with(const std::string& more) const;

 private:
  std::string command_, object_;
  std::chrono::milliseconds timeout_;
  pid_t pgid_;
  std::string aftermath_;
};

// Decodes a wait(2) status into an exit code in containerd's convention (128+signal if signalled).
int exit_code_from_status(int status);
// Decodes a wait(2) status into RunResult's exit_code / term_signal (nothing captured).
RunResult result_from_status(int status);

class ChildWaiter {
 public:
  virtual ~ChildWaiter() = default;
  // Runs fork_fn (which forks and returns the child's pid in the parent) such that the child's exit
  // cannot be reaped by anyone else before wait() is called for it.
  virtual pid_t spawn(const std::function<pid_t()>& fork_fn) = 0;
  // Blocks until the child spawned through spawn() exits; returns its raw wait status.
  virtual int wait(pid_t pid) = 0;
  // Non-blocking: the raw status if it exited already.
  virtual std::optional<int> try_wait(pid_t pid) = 0;
};

class DirectWaiter final : public ChildWaiter {
 public:
  pid_t spawn(const std::function<pid_t()>& fork_fn) override { return fork_fn(); }
  int wait(pid_t pid) override;
  std::optional<int> try_wait(pid_t pid) override;
};

class ProcessRunner {
 public:
  explicit ProcessRunner(ChildWaiter& waiter) : waiter_(waiter) {}
  virtual ~ProcessRunner() = default;
  // Runs to completion. Throws Error only when the program cannot be started; a non-zero exit is
  // reported in RunResult. Output is captured until the child exits (what it wrote is read then):
  // a grandchild that keeps the output pipes open does not keep run() waiting.
  virtual RunResult run(const Command& cmd);
  // Starts without waiting (stdio must be given as fds; nothing is captured). Returns the pid.
  pid_t start(const Command& cmd);
  int wait(pid_t pid) { return waiter_.wait(pid); }
  ChildWaiter& waiter() { return waiter_; }

 private:
  // pidfd: where to keep a pidfd of the child, opened before anyone can reap it (null: none).
  pid_t fork_exec(const Command& cmd, int in, int out, int err, int* pidfd = nullptr);
  ChildWaiter& waiter_;
};

// Looks a program up in PATH (or returns it if it contains a '/'); empty if not found.
std::string find_program(const std::string& name);
// Why `path` cannot be run as a program ("is a directory, not an executable file", "is not
// executable (mode 0644)", "cannot be found: ..."), or "" when it can.
std::string program_problem(const std::string& path);
// The same in the given search path ("dir:dir:..."), not this process's.
std::string find_program(const std::string& name, const std::string& search_path);

}  // namespace nvproxy
