#include "common/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>

#include "common/error.h"
#include "common/fs.h"
#include "common/text.h"
#include "common/unique_fd.h"

extern char** environ;

namespace nvproxy {

std::string RunResult::describe() const {
  std::string s;
  if (timed_out)
    s = "timed out, killed";
  else if (term_signal != 0)
    s = "killed by signal " + std::to_string(term_signal);
  else
    s = "exit status " + std::to_string(exit_code);
  std::string tail = err.empty() ? out : err;
  while (!tail.empty() && (tail.back() == '\n' || tail.back() == ' ')) tail.pop_back();
  if (tail.size() > 2000) tail = "..." + tail.substr(tail.size() - 2000);
  if (!tail.empty()) s += ": " + tail;
  return s;
}

DeadlineError::DeadlineError(std::string command, std::string object, std::chrono::milliseconds timeout, pid_t pgid,
                             std::string aftermath)
    : Error(Code::DeadlineExceeded, command + " of " + object + " did not finish within " + std::to_string(timeout.count()) +
                                        " ms" + (aftermath.empty() ? "" : "; " + aftermath)),
      command_(std::move(command)),
      object_(std::move(object)),
      timeout_(timeout),
      pgid_(pgid),
      aftermath_(std::move(aftermath)) {}

DeadlineError DeadlineError::with(const std::string& more) const {
  return {command_, object_, timeout_, pgid_, aftermath_.empty() ? more : aftermath_ + "; " + more};
}

int exit_code_from_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 255;
}

RunResult result_from_status(int status) {
  RunResult r;
  if (WIFEXITED(status))
    r.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    r.term_signal = WTERMSIG(status);
  return r;
}

int DirectWaiter::wait(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw sys_error("waitpid " + std::to_string(pid));
  }
  return status;
}

std::optional<int> DirectWaiter::try_wait(pid_t pid) {
  int status = 0;
  pid_t r = ::waitpid(pid, &status, WNOHANG);
  if (r == pid) return status;
  return std::nullopt;
}

std::string program_problem(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) < 0) return std::string("cannot be found: ") + std::strerror(errno);
  if (!S_ISREG(st.st_mode)) return "is " + std::string(file_kind(st.st_mode)) + ", not an executable file";
  if (::access(path.c_str(), X_OK) < 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return std::string("is not executable (mode ") + mode + "): " + std::strerror(errno);
  }
  return "";
}

std::string find_program(const std::string& name) {
  const char* path = ::getenv("PATH");
  return find_program(name, path ? path : "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
}

std::string find_program(const std::string& name, const std::string& p) {
  if (name.find('/') != std::string::npos) return program_problem(name).empty() ? name : "";
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find(':', start);
    if (end == std::string::npos) end = p.size();
    std::string dir = p.substr(start, end - start);
    if (!dir.empty()) {
      std::string cand = dir + "/" + name;
      struct stat st {};
      if (::stat(cand.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(cand.c_str(), X_OK) == 0) return cand;
    }
    start = end + 1;
  }
  return "";
}

namespace {

std::vector<std::string> merged_env(const std::vector<std::string>& add) {
  std::map<std::string, std::string> kv;
  std::vector<std::string> order;
  auto put = [&](const std::string& e) {
    auto eq = e.find('=');
    std::string k = e.substr(0, eq);
    if (!kv.count(k)) order.push_back(k);
    kv[k] = e;
  };
  for (char** e = environ; e && *e; ++e) put(*e);
  for (const auto& e : add) put(e);
  std::vector<std::string> out;
  out.reserve(order.size());
  for (const auto& k : order) out.push_back(kv[k]);
  return out;
}

struct Pipe {
  UniqueFd r, w;
  Pipe() { make_pipe(r, w, "a command's stdio"); }
};

}  // namespace

pid_t ProcessRunner::fork_exec(const Command& cmd, int in, int out, int err, int* pidfd) {
  if (cmd.argv.empty()) throw Error(Code::InvalidArgument, "empty command");
  std::string prog = find_program(cmd.argv[0]);
  if (prog.empty()) {
    bool is_path = cmd.argv[0].find('/') != std::string::npos;  // find_program does not search PATH then
    throw Error(is_path && ::access(cmd.argv[0].c_str(), F_OK) == 0 ? Code::FailedPrecondition : Code::NotFound,
                "program " + quote_value(cmd.argv[0]) + " " + (is_path ? program_problem(cmd.argv[0]) : "not found in PATH"));
  }
  // Everything the child touches is prepared before fork: after fork only async-signal-safe calls.
  std::vector<std::string> env = merged_env(cmd.env_add);
  std::vector<char*> argv, envp;
  for (const auto& a : cmd.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const char* cwd = cmd.cwd.empty() ? nullptr : cmd.cwd.c_str();
  const bool setsid_child = cmd.new_session;
  const bool setpgid_child = cmd.new_process_group && !cmd.new_session;
  const std::vector<int>& extra = cmd.extra_fds;

  return waiter_.spawn([&]() -> pid_t {
    pid_t pid = ::fork();
    if (pid < 0) throw sys_error("fork for " + cmd.argv[0]);
    if (pid > 0) {
      // Both sides set the group, so that it exists whichever runs first (the parent may kill it).
      if (setpgid_child) ::setpgid(pid, pid);
      // Opened while the waiter cannot reap the child yet, so the pid cannot name another process.
      if (pidfd) *pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
      return pid;
    }
    // Child.
    sigset_t all;
    sigemptyset(&all);
    sigprocmask(SIG_SETMASK, &all, nullptr);
    signal(SIGPIPE, SIG_DFL);
    if (setsid_child) setsid();
    if (setpgid_child) setpgid(0, 0);
    int moved[64];
    size_t n = extra.size() < 64 ? extra.size() : 64;
    for (size_t i = 0; i < n; ++i) moved[i] = fcntl(extra[i], F_DUPFD, 100);
    if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) _exit(127);
    for (size_t i = 0; i < n; ++i) dup2(moved[i], static_cast<int>(3 + i));
    close_range(static_cast<unsigned>(3 + n), ~0U, 0);
    if (cwd && chdir(cwd) < 0) _exit(127);
    execve(prog.c_str(), argv.data(), envp.data());
    _exit(127);
  });
}

pid_t ProcessRunner::start(const Command& cmd) {
  UniqueFd null_in, null_out;
  int in = cmd.stdin_fd, out = cmd.stdout_fd, err = cmd.stderr_fd;
  if (in < 0) {
    null_in = open_devnull(O_RDONLY);
    in = null_in.get();
  }
  if (out < 0 || err < 0) null_out = open_devnull(O_WRONLY);
  if (out < 0) out = null_out.get();
  if (err < 0) err = null_out.get();
  return fork_exec(cmd, in, out, err);
}

RunResult ProcessRunner::run(const Command& cmd) {
  using Clock = std::chrono::steady_clock;
  // After the child exited, what it wrote is in the pipes already; a grandchild holding them open
  // (a daemon, CRIU left behind) gets this long before reading stops.
  constexpr auto kDrainAfterExit = std::chrono::milliseconds(100);
  // Without a pidfd (kernels before 5.3) the child's exit is polled for this often.
  constexpr int kExitPollMs = 20;

  UniqueFd null_in;
  std::optional<Pipe> in_pipe, out_pipe, err_pipe;
  int in = cmd.stdin_fd, out = cmd.stdout_fd, err = cmd.stderr_fd;
  if (cmd.stdin_data) {
    in_pipe.emplace();
    in = in_pipe->r.get();
  } else if (in < 0) {
    null_in = open_devnull(O_RDONLY);
    in = null_in.get();
  }
  if (out < 0) {
    out_pipe.emplace();
    out = out_pipe->w.get();
  }
  if (err < 0) {
    err_pipe.emplace();
    err = err_pipe->w.get();
  }

  int raw_pidfd = -1;
  pid_t pid = fork_exec(cmd, in, out, err, &raw_pidfd);
  UniqueFd pidfd(raw_pidfd >= 0 ? raw_pidfd : -1);
  if (in_pipe) in_pipe->r.reset();
  if (out_pipe) out_pipe->w.reset();
  if (err_pipe) err_pipe->w.reset();

  RunResult res;
  res.pid = pid;
  const bool own_group = cmd.new_process_group || cmd.new_session;
  std::string_view to_write = cmd.stdin_data ? std::string_view(*cmd.stdin_data) : std::string_view();
  if (in_pipe && to_write.empty()) in_pipe->w.reset();
  if (in_pipe) ::fcntl(in_pipe->w.get(), F_SETFL, O_NONBLOCK);
  const auto deadline = Clock::now() + cmd.timeout;
  std::optional<int> status;  // known early only without a pidfd (try_wait reaps)
  bool exited = false;
  Clock::time_point drain_until{};
  auto ms_until = [](Clock::time_point t) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::now()).count();
    return left > 0 ? static_cast<int>(std::min<long long>(left, 1 << 30)) : 0;
  };
  auto note_exit = [&] {
    exited = true;
    drain_until = Clock::now() + kDrainAfterExit;
    if (in_pipe) in_pipe->w.reset();  // nobody reads it any more
  };
  while (true) {
    if (!exited && !pidfd) {
      if ((status = waiter_.try_wait(pid))) note_exit();
    }
    std::vector<pollfd> fds;
    if (out_pipe && out_pipe->r) fds.push_back({out_pipe->r.get(), POLLIN, 0});
    if (err_pipe && err_pipe->r) fds.push_back({err_pipe->r.get(), POLLIN, 0});
    if (in_pipe && in_pipe->w) fds.push_back({in_pipe->w.get(), POLLOUT, 0});
    if (exited && fds.empty()) break;
    if (!exited && pidfd) fds.push_back({pidfd.get(), POLLIN, 0});
    int wait_ms = -1;
    auto at_most = [&](int ms) { wait_ms = wait_ms < 0 ? ms : std::min(wait_ms, ms); };
    if (exited) at_most(ms_until(drain_until));
    if (!exited && cmd.timeout.count() > 0) at_most(ms_until(deadline));
    if (!exited && !pidfd) at_most(kExitPollMs);
    int r = ::poll(fds.data(), fds.size(), wait_ms);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw sys_error("poll for " + cmd.argv[0]);
    if (exited && Clock::now() >= drain_until) break;  // a grandchild keeps the pipes: stop reading
    if (!exited && cmd.timeout.count() > 0 && Clock::now() >= deadline) {
      // The child is stuck: kill it with everything in its group, stop reading (whatever still
      // holds the pipes does not matter any more) and reap it below.
      if (own_group && ::kill(-pid, SIGKILL) == 0) res.killed_pgid = pid;
      ::kill(pid, SIGKILL);
      res.timed_out = true;
      break;
    }
    for (const auto& p : fds) {
      if (!p.revents) continue;
      if (pidfd && p.fd == pidfd.get()) {
        note_exit();
        continue;
      }
      if (in_pipe && p.fd == in_pipe->w.get()) {
        ssize_t n = ::write(p.fd, to_write.data(), to_write.size());
        if (n > 0) to_write.remove_prefix(static_cast<size_t>(n));
        if (n < 0 && errno != EAGAIN && errno != EINTR) to_write = {};
        if (to_write.empty()) in_pipe->w.reset();
        continue;
      }
      char buf[8192];
      ssize_t n = ::read(p.fd, buf, sizeof buf);
      bool is_out = out_pipe && p.fd == out_pipe->r.get();
      if (n > 0)
        (is_out ? res.out : res.err).append(buf, static_cast<size_t>(n));
      else if (n == 0 || (errno != EINTR && errno != EAGAIN))
        (is_out ? out_pipe->r : err_pipe->r).reset();
    }
  }
  RunResult st = result_from_status(status ? *status : waiter_.wait(pid));
  res.exit_code = st.exit_code;
  res.term_signal = st.term_signal;
  return res;
}

}  // namespace nvproxy
