// Holding processes still while their CUDA state is checkpointed (nvproxy-cuda-helper's side).
//
// Once the driver has checkpointed a process, its device memory and GPU mappings are gone until the
// restore: a thread that runs meanwhile and touches them (XLA's allocator and event threads in JAX)
// faults and the process dies. The driver itself needs one thread of the process, its restore
// thread, for the checkpoint, the restore and the unlock. So every thread is stopped with ptrace
// (seize + interrupt: nothing the process can observe, no signal), and a CUDA process's restore
// thread alone is let run, with every signal blocked, for the length of one driver call.
//
// ptrace answers only the thread that attached, so every ptrace request runs on one tracer thread
// owned by this object; the driver calls themselves run on the caller's threads, in parallel.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace nvproxy::checkpoint {

class ThreadHold {
 public:
  struct Target {
    pid_t pid = 0;
    pid_t restore_tid = 0;  // the thread the driver needs to run; 0: none (not a CUDA process)
  };

  // stall_patience: how long a driver call may find its restore thread asleep on a futex (waiting
  // for a held thread of its own process) before the rest of that process is let run for the
  // rest of the call (measured on the H200: a job runner's worker whose checkpoint never ended).
  explicit ThreadHold(std::chrono::milliseconds stall_patience = std::chrono::seconds(3));
  ~ThreadHold();  // lets everything go and ends the tracer thread
  ThreadHold(const ThreadHold&) = delete;
  ThreadHold& operator=(const ThreadHold&) = delete;

  // Stops every thread of each target not held yet, listing its threads again until no new one
  // appears (a running thread may start another). Returns the pids that had ended. Throws Error
  // naming the pid, the thread and the ptrace call (the targets held so far stay held).
  std::vector<pid_t> hold(const std::vector<Target>& targets);
  // The same for processes the cgroup freezer holds: a frozen thread takes the interrupt only once
  // thawed, so it is seized and interrupted, not waited for. The caller thaws them, then settle()s.
  std::vector<pid_t> hold_frozen(const std::vector<Target>& targets);
  // The same for processes left stopped (SIGSTOP) by the runtime's restore (CRIU's leave-stopped):
  // every thread is seized, then the processes are sent SIGCONT, which ends their stop but not
  // the hold. On any failure they are sent SIGCONT all the same: none is left stopped.
  std::vector<pid_t> hold_stopped(const std::vector<Target>& targets);
  // Waits until every thread seized by hold_frozen has stopped (Error after 10 s). Every other call
  // settles first.
  void settle();
  // Every held thread goes on. A signal that came while a thread was held is sent to it again.
  void release();
  // The same for these processes only (the rest stay held).
  void release(const std::vector<pid_t>& pids);
  [[nodiscard]] bool held(pid_t pid);
  // Runs fn with pid's restore thread let run (every signal blocked) and the rest held. When pid is
  // not held, or has no restore thread, fn runs alone. Should the restore thread sleep on a futex
  // for stall_patience while fn has not returned, the driver waits for another thread of the
  // process: every thread of it is let run until fn returns, then held again (logged to stderr).
  void with_restore_thread(pid_t pid, const std::function<void()>& fn);
  // How many driver calls needed their whole process let run (see with_restore_thread).
  [[nodiscard]] int stalls() const { return stalls_; }

 private:
  struct Thread {
    int signal = 0;  // taken from it at a signal-delivery stop; sent again at release
  };
  struct Proc {
    pid_t restore_tid = 0;
    std::map<pid_t, Thread> threads;
    std::vector<pid_t> pending;    // seized while frozen: not known to be stopped yet
    std::uint64_t saved_mask = 0;  // the restore thread's signal mask while it runs
    int running = 0;               // driver calls in flight that let the restore thread run
    int others_running = 0;        // calls in flight that let every thread run (a stall)
  };

  // Runs fn on the tracer thread and returns once it has (its exception is rethrown here).
  void on_tracer(const std::function<void()>& fn);
  void tracer_loop();

  // On the tracer thread only:
  bool seize_process(pid_t pid, Proc& p, bool frozen);  // false: the process has ended
  void settle_all();
  std::vector<pid_t> hold_targets(const std::vector<Target>& targets, bool frozen);
  bool wait_stopped(pid_t pid, pid_t tid, Thread& t);  // false: the thread has ended
  void let_run(pid_t pid, Proc& p);
  void stop_again(pid_t pid, Proc& p);
  void let_others_run(pid_t pid, Proc& p);
  void stop_others_again(pid_t pid, Proc& p);
  // Waits for fn's end, watching pid's restore thread for a stall; true if the others were let run.
  bool watch_call(pid_t pid, pid_t restore_tid, std::mutex& m, std::condition_variable& cv, const bool& done);
  void release_all();
  void release_proc(pid_t pid, Proc& p);
  void pass_trap(pid_t pid, pid_t tid, Thread& t);

  std::map<pid_t, Proc> procs_;  // tracer thread only
  const std::chrono::milliseconds stall_patience_;
  std::atomic<int> stalls_{0};

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::thread tracer_;
};

}  // namespace nvproxy::checkpoint
