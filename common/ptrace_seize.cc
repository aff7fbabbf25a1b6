#include "common/ptrace_seize.h"

#include <sys/ptrace.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "common/error.h"

namespace nvproxy {

namespace {

std::string task_file(pid_t pid, pid_t tid, const char* name) {
  return "/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/" + name;
}

// The thread's state letter (R, S, Z, ...); 0 when it is gone.
char thread_state(pid_t pid, pid_t tid) {
  std::ifstream in(task_file(pid, tid, "stat"));
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto close = stat.rfind(')');  // the name in parentheses may hold anything
  return close == std::string::npos || close + 2 >= stat.size() ? 0 : stat[close + 2];
}

pid_t tracer_of(pid_t pid, pid_t tid) {
  std::ifstream in(task_file(pid, tid, "status"));
  for (std::string line; std::getline(in, line);)
    if (line.rfind("TracerPid:", 0) == 0) return static_cast<pid_t>(std::strtol(line.c_str() + 10, nullptr, 10));
  return 0;
}

}  // namespace

bool seize_thread(pid_t pid, pid_t tid, const std::string& who) {
  if (::ptrace(PTRACE_SEIZE, tid, nullptr, nullptr) == 0) return true;
  const int err = errno;
  if (err == ESRCH) return false;  // ended between the listing and the seize
  if (err != EPERM) throw sys_error(who + ": ptrace(SEIZE)", err);
  char st = thread_state(pid, tid);
  if (st == 0 || st == 'Z' || st == 'X') return false;
  if (pid_t tracer = tracer_of(pid, tid); tracer != 0)
    throw Error(Code::FailedPrecondition,
                who + ": it is already traced by pid " + std::to_string(tracer) + " (a debugger or strace?)");
  throw sys_error(who + ": ptrace(SEIZE) (state " + std::string(1, st) + ")", err);
}

}  // namespace nvproxy
