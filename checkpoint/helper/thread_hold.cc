#include "checkpoint/helper/thread_hold.h"

#include <dirent.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <exception>
#include <future>
#include <set>
#include <string>

#include "common/error.h"
#include "common/fs.h"
#include "common/ptrace_seize.h"

namespace nvproxy::checkpoint {

namespace {

using Clock = std::chrono::steady_clock;

// A thread stops within microseconds of an interrupt, unless it sits in an uninterruptible wait
// (a driver call, a page fault on a slow disk): it stops when that ends.
constexpr auto kStopDeadline = std::chrono::seconds(10);
// Bound on listing a process's threads again while new ones keep appearing.
constexpr int kSeizeRounds = 64;

std::string who(pid_t pid, pid_t tid) {
  return "pid " + std::to_string(pid) + (tid == pid ? "" : " thread " + std::to_string(tid));
}

std::set<pid_t> list_threads(pid_t pid) {
  std::set<pid_t> out;
  std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;  // the process has ended
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    long tid = std::strtol(e->d_name, &end, 10);
    if (end != e->d_name && *end == '\0' && tid > 0) out.insert(static_cast<pid_t>(tid));
  }
  ::closedir(d);
  return out;
}

long ptrace_call(enum __ptrace_request req, pid_t tid, void* addr = nullptr, void* data = nullptr) {
  return ::ptrace(req, tid, addr, data);
}

void* as_data(long v) {
  return reinterpret_cast<void*>(static_cast<std::intptr_t>(v));
}

}  // namespace

ThreadHold::ThreadHold(std::chrono::milliseconds stall_patience)
    : stall_patience_(stall_patience), tracer_([this] { tracer_loop(); }) {}

ThreadHold::~ThreadHold() {
  try {
    on_tracer([this] { release_all(); });
  } catch (...) {  // nothing held can be left stopped: the exit of this process detaches them anyway
  }
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  tracer_.join();
}

void ThreadHold::tracer_loop() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock lk(mu_);
      cv_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    job();
  }
}

void ThreadHold::on_tracer(const std::function<void()>& fn) {
  std::packaged_task<void()> task(fn);
  std::future<void> done = task.get_future();
  {
    std::lock_guard lk(mu_);
    if (stopping_) throw Error(Code::Internal, "thread hold: already ended");
    queue_.emplace_back([&task] { task(); });
  }
  cv_.notify_all();
  done.get();
}

std::vector<pid_t> ThreadHold::hold(const std::vector<Target>& targets) {
  return hold_targets(targets, false);
}

std::vector<pid_t> ThreadHold::hold_frozen(const std::vector<Target>& targets) {
  return hold_targets(targets, true);
}

std::vector<pid_t> ThreadHold::hold_stopped(const std::vector<Target>& targets) {
  std::vector<pid_t> ended;
  auto cont_all = [&] {
    for (const Target& t : targets) ::kill(t.pid, SIGCONT);
  };
  try {
    ended = hold_targets(targets, false);
  } catch (...) {
    cont_all();
    throw;
  }
  cont_all();
  // SIGCONT ends the group stop of a traced thread but leaves it stopped, with a notification trap
  // pending for its next resume: each thread is taken through it now, so that a restore thread let
  // run later runs rather than trapping again.
  on_tracer([&] {
    for (const Target& t : targets) {
      auto it = procs_.find(t.pid);
      if (it == procs_.end()) continue;
      for (auto th = it->second.threads.begin(); th != it->second.threads.end();) {
        try {
          pass_trap(t.pid, th->first, th->second);
          ++th;
        } catch (const Error& e) {
          if (e.code() != Code::NotFound) throw;
          th = it->second.threads.erase(th);
        }
      }
    }
  });
  return ended;
}

void ThreadHold::pass_trap(pid_t pid, pid_t tid, Thread& t) {
  // The interrupt makes sure the thread stops again (any trap clears both pending traps).
  if (ptrace_call(PTRACE_INTERRUPT, tid) != 0 || ptrace_call(PTRACE_CONT, tid) != 0) {
    if (errno == ESRCH) throw Error(Code::NotFound, who(pid, tid) + " has ended");
    throw sys_error("holding " + who(pid, tid) + " still after SIGCONT: ptrace");
  }
  if (!wait_stopped(pid, tid, t)) throw Error(Code::NotFound, who(pid, tid) + " has ended");
}

void ThreadHold::settle() {
  on_tracer([this] { settle_all(); });
}

void ThreadHold::settle_all() {
  for (auto& [pid, p] : procs_) {
    std::vector<pid_t> pending = std::move(p.pending);
    p.pending.clear();
    for (pid_t tid : pending)
      if (!wait_stopped(pid, tid, p.threads[tid])) p.threads.erase(tid);
  }
}

std::vector<pid_t> ThreadHold::hold_targets(const std::vector<Target>& targets, bool frozen) {
  std::vector<pid_t> ended;
  on_tracer([&] {
    if (!frozen) settle_all();
    for (const Target& t : targets) {
      if (procs_.count(t.pid)) continue;
      Proc p{.restore_tid = t.restore_tid};
      bool alive = false;
      try {
        alive = seize_process(t.pid, p, frozen);
      } catch (...) {
        procs_.emplace(t.pid, std::move(p));  // what was seized is released with the rest
        throw;
      }
      if (alive)
        procs_.emplace(t.pid, std::move(p));
      else
        ended.push_back(t.pid);
    }
  });
  return ended;
}

bool ThreadHold::seize_process(pid_t pid, Proc& p, bool frozen) {
  for (int round = 0; round < kSeizeRounds; ++round) {
    std::vector<pid_t> fresh;
    for (pid_t tid : list_threads(pid)) {
      if (p.threads.count(tid)) continue;
      if (!seize_thread(pid, tid, "holding " + who(pid, tid) + " still")) continue;
      p.threads.emplace(tid, Thread{});
      if (ptrace_call(PTRACE_INTERRUPT, tid) != 0 && errno != ESRCH)
        throw sys_error("holding " + who(pid, tid) + " still: ptrace(INTERRUPT)");
      fresh.push_back(tid);
    }
    if (fresh.empty()) return !p.threads.empty();
    if (frozen) {  // a frozen process starts no thread: one listing is all of them
      p.pending = std::move(fresh);
      return !p.threads.empty();
    }
    for (pid_t tid : fresh)
      if (!wait_stopped(pid, tid, p.threads[tid])) p.threads.erase(tid);
  }
  throw Error(Code::Unavailable, "holding pid " + std::to_string(pid) + " still: it kept starting threads (" +
                                     std::to_string(p.threads.size()) + " stopped, new ones after " +
                                     std::to_string(kSeizeRounds) + " listings)");
}

bool ThreadHold::wait_stopped(pid_t pid, pid_t tid, Thread& t) {
  const auto deadline = Clock::now() + kStopDeadline;
  for (;;) {
    int st = 0;
    pid_t r = ::waitpid(tid, &st, __WALL | WNOHANG);
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == ECHILD) return false;  // no longer ours: it has ended
      throw sys_error("holding " + who(pid, tid) + " still: waitpid");
    }
    if (r == tid) {
      if (WIFEXITED(st) || WIFSIGNALED(st)) return false;
      if (WIFSTOPPED(st)) {
        if ((st >> 16) == PTRACE_EVENT_STOP) return true;  // the interrupt (or a group stop)
        // A signal was about to be delivered: it is kept for the release, and the thread goes on
        // to the interrupt's stop without returning to its own code.
        t.signal = WSTOPSIG(st);
        if (ptrace_call(PTRACE_CONT, tid) != 0 && errno != ESRCH)
          throw sys_error("holding " + who(pid, tid) + " still: ptrace(CONT) past signal " + std::to_string(t.signal));
        continue;
      }
    }
    if (Clock::now() > deadline)
      throw Error(Code::DeadlineExceeded, "holding " + who(pid, tid) + " still: it did not stop within " +
                                              std::to_string(std::chrono::seconds(kStopDeadline).count()) +
                                              " s (an uninterruptible wait?)");
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

void ThreadHold::release() {
  on_tracer([this] { release_all(); });
}

void ThreadHold::release(const std::vector<pid_t>& pids) {
  on_tracer([&] {
    settle_all();  // a tracee is detached from a stop only
    for (pid_t pid : pids)
      if (auto it = procs_.find(pid); it != procs_.end()) {
        release_proc(pid, it->second);
        procs_.erase(it);
      }
  });
}

void ThreadHold::release_all() {
  try {
    settle_all();
  } catch (const std::exception&) {  // one that never stopped is let go with the exit of this process
  }
  for (auto& [pid, p] : procs_) release_proc(pid, p);
  procs_.clear();
}

void ThreadHold::release_proc(pid_t pid, Proc& p) {
  for (auto& [tid, t] : p.threads) {
    if (t.signal != 0) ::syscall(SYS_tgkill, pid, tid, t.signal);
    ptrace_call(PTRACE_DETACH, tid);  // ESRCH: it has ended meanwhile
  }
}

bool ThreadHold::held(pid_t pid) {
  bool out = false;
  on_tracer([&] {
    settle_all();
    out = procs_.count(pid) > 0;
  });
  return out;
}

void ThreadHold::let_run(pid_t pid, Proc& p) {
  pid_t tid = p.restore_tid;
  if (p.running++ > 0) return;  // already let run for another call in flight
  std::uint64_t all = ~std::uint64_t{0};
  if (ptrace_call(PTRACE_GETSIGMASK, tid, as_data(sizeof p.saved_mask), &p.saved_mask) != 0 ||
      ptrace_call(PTRACE_SETSIGMASK, tid, as_data(sizeof all), &all) != 0) {
    --p.running;
    throw sys_error("letting the restore thread of " + who(pid, tid) + " run: ptrace(SETSIGMASK)");
  }
  if (ptrace_call(PTRACE_CONT, tid) != 0) {
    --p.running;
    throw sys_error("letting the restore thread of " + who(pid, tid) + " run: ptrace(CONT)");
  }
}

void ThreadHold::stop_again(pid_t pid, Proc& p) {
  pid_t tid = p.restore_tid;
  if (--p.running > 0) return;
  if (ptrace_call(PTRACE_INTERRUPT, tid) != 0) {
    if (errno == ESRCH) return;
    throw sys_error("holding the restore thread of " + who(pid, tid) + " again: ptrace(INTERRUPT)");
  }
  if (!wait_stopped(pid, tid, p.threads[tid])) {
    p.threads.erase(tid);
    return;
  }
  ptrace_call(PTRACE_SETSIGMASK, tid, as_data(sizeof p.saved_mask), &p.saved_mask);
}

void ThreadHold::with_restore_thread(pid_t pid, const std::function<void()>& fn) {
  bool let = false;
  pid_t restore_tid = 0;
  on_tracer([&] {
    settle_all();
    auto it = procs_.find(pid);
    if (it == procs_.end() || it->second.restore_tid == 0 || !it->second.threads.count(it->second.restore_tid)) return;
    let_run(pid, it->second);
    restore_tid = it->second.restore_tid;
    let = true;
  });
  if (!let) {
    fn();
    return;
  }
  std::mutex m;
  std::condition_variable cv;
  bool done = false, others = false;
  std::thread watcher([&] { others = watch_call(pid, restore_tid, m, cv, done); });
  std::exception_ptr failed;
  try {
    fn();
  } catch (...) {
    failed = std::current_exception();
  }
  {
    std::lock_guard lk(m);
    done = true;
  }
  cv.notify_all();
  watcher.join();
  on_tracer([&] {
    auto it = procs_.find(pid);
    if (it == procs_.end()) return;
    if (others) stop_others_again(pid, it->second);
    stop_again(pid, it->second);
  });
  if (failed) std::rethrow_exception(failed);
}

namespace {
// The restore thread asleep on a futex: waiting for a thread of its process, not for the GPU.
bool on_futex(pid_t pid, pid_t tid) {
  std::string base = "/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/";
  try {
    std::string stat = read_file(base + "stat");
    auto close = stat.rfind(')');
    if (close == std::string::npos || close + 2 >= stat.size() || stat[close + 2] != 'S') return false;
    return read_file(base + "wchan").starts_with("futex");
  } catch (const std::exception&) {
    return false;
  }
}
}  // namespace

bool ThreadHold::watch_call(pid_t pid, pid_t restore_tid, std::mutex& m, std::condition_variable& cv, const bool& done) {
  constexpr auto kPoll = std::chrono::milliseconds(100);
  auto asleep_since = Clock::time_point::max();
  std::unique_lock lk(m);
  while (!cv.wait_for(lk, kPoll, [&] { return done; })) {
    if (!on_futex(pid, restore_tid)) {
      asleep_since = Clock::time_point::max();
      continue;
    }
    auto now = Clock::now();
    if (asleep_since == Clock::time_point::max()) asleep_since = now;
    if (now - asleep_since < stall_patience_) continue;
    lk.unlock();
    bool let = false;
    try {
      on_tracer([&] {
        auto it = procs_.find(pid);
        if (it == procs_.end()) return;
        let_others_run(pid, it->second);
        let = true;
      });
    } catch (const std::exception& e) {
      std::fprintf(stderr, "nvproxy-cuda-helper: pid %d: could not let its threads run: %s\n", pid, e.what());
    }
    if (let) {
      ++stalls_;
      std::fprintf(stderr,
                   "nvproxy-cuda-helper: pid %d: its restore thread %d waited %lld ms on a held thread of its own; "
                   "the process runs until the driver call returns\n",
                   pid, restore_tid,
                   static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(stall_patience_).count()));
    }
    lk.lock();
    cv.wait(lk, [&] { return done; });
    return let;
  }
  return false;
}

void ThreadHold::let_others_run(pid_t pid, Proc& p) {
  if (p.others_running++ > 0) return;
  for (auto& [tid, t] : p.threads) {
    if (tid == p.restore_tid) continue;
    if (ptrace_call(PTRACE_CONT, tid, nullptr, as_data(t.signal)) == 0) t.signal = 0;  // ESRCH: ended
  }
  (void)pid;
}

void ThreadHold::stop_others_again(pid_t pid, Proc& p) {
  if (--p.others_running > 0) return;
  for (auto it = p.threads.begin(); it != p.threads.end();) {
    if (it->first == p.restore_tid) {
      ++it;
      continue;
    }
    if (ptrace_call(PTRACE_INTERRUPT, it->first) != 0 || !wait_stopped(pid, it->first, it->second)) {
      it = p.threads.erase(it);  // it ended meanwhile
      continue;
    }
    ++it;
  }
  seize_process(pid, p, false);  // threads it started meanwhile
}

}  // namespace nvproxy::checkpoint
