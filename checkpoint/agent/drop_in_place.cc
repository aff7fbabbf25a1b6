#include "checkpoint/agent/drop_in_place.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "checkpoint/shared/proc_maps.h"
#include "common/error.h"
#include "common/number.h"
#include "common/ptrace_seize.h"

namespace nvproxy::checkpoint {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

#if defined(__x86_64__)

namespace {

std::vector<pid_t> threads_of(pid_t pid) {
  std::vector<pid_t> tids;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    const std::string n = e.path().filename().string();
    if (auto tid = parse_number<pid_t>(n)) tids.push_back(*tid);
  }
  if (ec) throw Error(Code::NotFound, "pid " + std::to_string(pid) + ": cannot list its threads: " + ec.message());
  return tids;
}

// Every thread of one process, seized and stopped for as long as this lives; detached (each with
// any signal that arrived meanwhile) when it goes.
class StoppedProcess {
 public:
  StoppedProcess(pid_t pid, Clock::time_point deadline) : pid_(pid), deadline_(deadline) {
    try {
      seize_all();
    } catch (...) {
      detach_all();  // no destructor runs for a constructor that throws
      throw;
    }
  }
  StoppedProcess(const StoppedProcess&) = delete;
  StoppedProcess& operator=(const StoppedProcess&) = delete;
  ~StoppedProcess() { detach_all(); }

  // Waits for tid's next ptrace stop; returns its wait status.
  int wait_stop(pid_t tid) {
    for (;;) {
      int st = 0;
      pid_t r = ::waitpid(tid, &st, __WALL | WNOHANG);
      if (r == tid) {
        if (WIFSTOPPED(st)) return st;
        pending_.erase(tid);
        throw Error(Code::FailedPrecondition, what(tid) + " ended while stopped for the release");
      }
      if (r < 0 && errno != EINTR) throw sys_error(what(tid) + ": waitpid");
      if (Clock::now() > deadline_) throw Error(Code::DeadlineExceeded, what(tid) + ": no ptrace stop before the deadline");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  void keep_signal(pid_t tid, int sig) { pending_[tid] = sig; }
  [[nodiscard]] std::string what(pid_t tid) const {
    return "pid " + std::to_string(pid_) + (tid == pid_ ? std::string() : " thread " + std::to_string(tid));
  }

 private:
  void seize_all() {
    // Threads started while the others were being stopped show up in the next listing.
    for (int round = 0; round < 16; ++round) {
      bool fresh = false;
      for (pid_t tid : threads_of(pid_)) {
        if (pending_.count(tid)) continue;
        if (!seize_thread(pid_, tid, what(tid))) continue;  // ended (or exited, not reaped) meanwhile
        pending_[tid] = 0;
        fresh = true;
        if (::ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr) != 0) throw sys_error(what(tid) + ": ptrace(INTERRUPT)");
        int st = wait_stop(tid);
        if (st >> 16 != PTRACE_EVENT_STOP) pending_[tid] = WSTOPSIG(st);  // a signal on its way in
      }
      if (!fresh) break;
    }
    if (!pending_.count(pid_)) throw Error(Code::NotFound, "pid " + std::to_string(pid_) + " is gone");
  }
  void detach_all() {
    for (const auto& [tid, sig] : pending_)
      ::ptrace(PTRACE_DETACH, tid, nullptr, reinterpret_cast<void*>(static_cast<std::intptr_t>(sig)));
    pending_.clear();
  }

  pid_t pid_;
  Clock::time_point deadline_;
  std::map<pid_t, int> pending_;  // tid -> signal to hand back at the detach (0: none)
};

// The registers to resume with. A thread stopped inside an interrupted system call holds its
// restart code in rax; Linux restarts the call when the thread resumes with those registers, but
// gVisor decides that once, on the first resume, which was an injected call's: so the restart is
// made here, as the kernel would (the call again, or restart_syscall for a restart block).
user_regs_struct restarted(user_regs_struct r) {
  if (static_cast<long long>(r.orig_rax) < 0) return r;
  switch (-static_cast<long long>(r.rax)) {
    case 512:  // ERESTARTSYS
    case 513:  // ERESTARTNOINTR
    case 514:  // ERESTARTNOHAND
      r.rax = r.orig_rax;
      r.rip -= 2;
      break;
    case 516:  // ERESTART_RESTARTBLOCK
      r.rax = SYS_restart_syscall;
      r.rip -= 2;
      break;
    default: return r;
  }
  r.orig_rax = static_cast<unsigned long long>(-1);
  return r;
}

// Runs system calls in one stopped thread: `syscall; int3` written over the code at its
// instruction pointer, its registers pointed at it per call; both put back when done.
class Injector {
 public:
  Injector(StoppedProcess& p, pid_t tid) : p_(p), tid_(tid) {
    if (::ptrace(PTRACE_GETREGS, tid, nullptr, &saved_) != 0) throw sys_error(p.what(tid) + ": ptrace(GETREGS)");
    at_ = saved_.rip;
    errno = 0;
    word_ = ::ptrace(PTRACE_PEEKTEXT, tid, reinterpret_cast<void*>(at_), nullptr);
    if (errno != 0) throw sys_error(p.what(tid) + ": ptrace(PEEKTEXT)");
    // Little endian: 0f 05 (syscall), cc (int3), then the word's own remaining bytes.
    long patched = static_cast<long>((static_cast<unsigned long>(word_) & ~0xffffffUL) | 0xcc050fUL);
    poke(at_, patched);
  }
  Injector(const Injector&) = delete;
  Injector& operator=(const Injector&) = delete;
  ~Injector() {
    for (auto it = stack_.rbegin(); it != stack_.rend(); ++it)
      ::ptrace(PTRACE_POKEDATA, tid_, reinterpret_cast<void*>(it->first), reinterpret_cast<void*>(it->second));
    ::ptrace(PTRACE_POKETEXT, tid_, reinterpret_cast<void*>(at_), reinterpret_cast<void*>(word_));
    user_regs_struct back = restarted(saved_);
    ::ptrace(PTRACE_SETREGS, tid_, nullptr, &back);
  }

  // A string placed well below the thread's stack pointer (past the red zone); its address.
  std::uintptr_t put_string(const std::string& s) {
    std::uintptr_t base = (saved_.rsp - 1024) & ~std::uintptr_t{15};
    for (std::size_t off = 0; off <= s.size(); off += sizeof(long)) {
      std::uintptr_t a = base + off;
      errno = 0;
      long old = ::ptrace(PTRACE_PEEKDATA, tid_, reinterpret_cast<void*>(a), nullptr);
      if (errno != 0) throw sys_error(p_.what(tid_) + ": ptrace(PEEKDATA) of its stack");
      stack_.emplace_back(a, old);
      long w = 0;
      std::memcpy(&w, s.c_str() + off, std::min(sizeof w, s.size() + 1 - off));
      if (::ptrace(PTRACE_POKEDATA, tid_, reinterpret_cast<void*>(a), reinterpret_cast<void*>(w)) != 0)
        throw sys_error(p_.what(tid_) + ": ptrace(POKEDATA) of its stack");
    }
    return base;
  }

  // The call's return value (a negative errno on failure).
  long call(long nr, std::initializer_list<unsigned long long> args) {
    user_regs_struct r = saved_;
    r.rax = static_cast<unsigned long long>(nr);
    r.orig_rax = static_cast<unsigned long long>(-1);  // no system call to restart here
    r.rip = at_;
    unsigned long long* slot[] = {&r.rdi, &r.rsi, &r.rdx, &r.r10, &r.r8, &r.r9};
    std::size_t i = 0;
    for (auto a : args) *slot[i++] = a;
    if (::ptrace(PTRACE_SETREGS, tid_, nullptr, &r) != 0) throw sys_error(p_.what(tid_) + ": ptrace(SETREGS)");
    for (;;) {
      if (::ptrace(PTRACE_CONT, tid_, nullptr, nullptr) != 0) throw sys_error(p_.what(tid_) + ": ptrace(CONT)");
      int st = p_.wait_stop(tid_);
      if (WSTOPSIG(st) == SIGTRAP && (st >> 16) == 0) break;
      if ((st >> 16) == 0) p_.keep_signal(tid_, WSTOPSIG(st));  // someone's signal: handed back at the detach
    }
    user_regs_struct out{};
    if (::ptrace(PTRACE_GETREGS, tid_, nullptr, &out) != 0) throw sys_error(p_.what(tid_) + ": ptrace(GETREGS)");
    if (out.rip != at_ + 3)
      throw Error(Code::Internal, p_.what(tid_) + ": the injected system call stopped at an unexpected address");
    return static_cast<long>(out.rax);
  }

 private:
  void poke(std::uintptr_t a, long w) {
    if (::ptrace(PTRACE_POKETEXT, tid_, reinterpret_cast<void*>(a), reinterpret_cast<void*>(w)) != 0)
      throw sys_error(p_.what(tid_) + ": ptrace(POKETEXT)");
  }
  StoppedProcess& p_;
  pid_t tid_;
  user_regs_struct saved_{};
  std::uintptr_t at_ = 0;
  long word_ = 0;
  std::vector<std::pair<std::uintptr_t, long>> stack_;
};

std::string errno_text(long r) {
  return std::strerror(static_cast<int>(-r));
}

}  // namespace

void drop_in_place(const DropRequest& req, std::chrono::milliseconds timeout) {
  if (req.fds.empty() && req.mappings.empty()) return;
  const std::string who = "pid " + std::to_string(req.pid);
  StoppedProcess proc(req.pid, Clock::now() + timeout);
  Injector inj(proc, req.pid);
  std::uintptr_t path = inj.put_string("/dev/null");
  long null_fd = inj.call(SYS_openat, {static_cast<unsigned long long>(AT_FDCWD), path, O_RDWR | O_CLOEXEC, 0});
  if (null_fd < 0) throw Error(Code::FailedPrecondition, who + ": open(/dev/null) in the process: " + errno_text(null_fd));
  auto close_null = [&] { inj.call(SYS_close, {static_cast<unsigned long long>(null_fd)}); };
  for (int fd : req.fds) {
    long r = inj.call(SYS_dup2, {static_cast<unsigned long long>(null_fd), static_cast<unsigned long long>(fd)});
    if (r != fd) {
      close_null();
      throw Error(Code::FailedPrecondition, who + ": dup2 of /dev/null over fd " + std::to_string(fd) + ": " +
                                                (r < 0 ? errno_text(r) : "returned " + std::to_string(r)));
    }
  }
  close_null();
  for (const auto& m : req.mappings) {
    long r = inj.call(SYS_mmap, {m.start, m.end - m.start, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
                                 static_cast<unsigned long long>(-1), 0});
    if (r != static_cast<long>(m.start)) {
      std::ostringstream a;
      a << std::hex << m.start << "-" << m.end;
      throw Error(Code::FailedPrecondition,
                  who + ": mmap of a reservation over " + a.str() + ": " + (r < 0 ? errno_text(r) : "placed elsewhere"));
    }
  }
}

namespace {
// The status flags of pid's fd (PROC/PID/fdinfo/FD "flags:", octal); -1 when unreadable.
long fd_status_flags(pid_t pid, int fd) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/fdinfo/" + std::to_string(fd));
  for (std::string line; std::getline(in, line);)
    if (line.rfind("flags:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 8);
  return -1;
}
}  // namespace

std::map<int, int> shared_with(pid_t pid, const std::vector<int>& fds, pid_t other, const std::vector<int>& theirs,
                               std::chrono::milliseconds timeout) {
  std::map<int, int> out;
  if (fds.empty() || theirs.empty()) return out;
  const std::string who = "pid " + std::to_string(pid);
  StoppedProcess proc(pid, Clock::now() + timeout);
  Injector inj(proc, pid);
  // Each flip is undone before the next, so the ancestor's flags are read once to compare with.
  std::map<int, long> before;
  for (int t : theirs) before[t] = fd_status_flags(other, t);
  for (int fd : fds) {
    long fl = inj.call(SYS_fcntl, {static_cast<unsigned long long>(fd), F_GETFL});
    if (fl < 0)
      throw Error(Code::FailedPrecondition, who + ": fcntl(F_GETFL) of fd " + std::to_string(fd) + ": " + errno_text(fl));
    long r = inj.call(SYS_fcntl, {static_cast<unsigned long long>(fd), F_SETFL, static_cast<unsigned long long>(fl ^ O_APPEND)});
    if (r < 0) throw Error(Code::FailedPrecondition, who + ": fcntl(F_SETFL) of fd " + std::to_string(fd) + ": " + errno_text(r));
    for (int t : theirs) {
      long now = fd_status_flags(other, t);
      if (before[t] >= 0 && now >= 0 && ((before[t] ^ now) & O_APPEND)) out[fd] = t;
    }
    r = inj.call(SYS_fcntl, {static_cast<unsigned long long>(fd), F_SETFL, static_cast<unsigned long long>(fl)});
    if (r < 0) throw Error(Code::Internal, who + ": putting back the flags of fd " + std::to_string(fd) + ": " + errno_text(r));
  }
  return out;
}

#else

std::map<int, int> shared_with(pid_t pid, const std::vector<int>&, pid_t, const std::vector<int>&, std::chrono::milliseconds) {
  throw Error(Code::Unimplemented, "pid " + std::to_string(pid) + ": telling inherited files apart is x86-64 only");
}

void drop_in_place(const DropRequest& req, std::chrono::milliseconds) {
  throw Error(Code::Unimplemented, "pid " + std::to_string(req.pid) + ": dropping device files in place is x86-64 only");
}

#endif

std::vector<AddressRange> mappings_of(pid_t pid, const std::vector<std::string>& paths) {
  auto maps = read_maps("/proc/" + std::to_string(pid) + "/maps");
  if (!maps) throw Error(Code::NotFound, "pid " + std::to_string(pid) + ": cannot read its mappings");
  std::vector<AddressRange> out;
  for (const MapsEntry& m : *maps)
    if (std::find(paths.begin(), paths.end(), m.path) != paths.end()) out.push_back({m.start, m.end});
  return out;
}

}  // namespace nvproxy::checkpoint
