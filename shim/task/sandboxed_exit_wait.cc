#include "shim/task/sandboxed_exit_wait.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "common/unique_fd.h"

namespace nvproxy::shim {

std::optional<int> runsc_wait_exit_code(const std::string& answer) {
  auto j = nlohmann::json::parse(answer, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  auto it = j.find("exitStatus");
  if (it == j.end() || !it->is_number_integer()) return std::nullopt;
  const auto code = it->get<long long>();
  if (code < 0 || code > 255) return std::nullopt;
  return static_cast<int>(code);
}

SandboxedExitWait::SandboxedExitWait(ProcessRunner& runner, Logger& log, std::string id, std::vector<std::string> argv,
                                     std::function<void(int)> ended)
    : runner_(runner), log_(log), id_(std::move(id)), ended_(std::move(ended)) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0)
    throw Error(Code::Internal, "container \"" + id_ + "\": cannot make a pipe for runsc wait: " + std::strerror(errno));
  UniqueFd rd(p[0]), wr(p[1]);
  UniqueFd null(::open("/dev/null", O_WRONLY | O_CLOEXEC));
  // Its own group: the destructor's kill reaches whatever it started.
  pid_ = runner_.start(
      {.argv = std::move(argv), .stdout_fd = wr.get(), .stderr_fd = null ? null.get() : wr.get(), .new_process_group = true});
  wr.reset();
  thread_ = std::thread([this, out = rd.release()] { wait(out); });
}

SandboxedExitWait::~SandboxedExitWait() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
    if (pid_ > 0) ::kill(-pid_, SIGKILL);
  }
  // The call that ended the container may be what destroys this, on the wait's own thread.
  if (thread_.get_id() == std::this_thread::get_id())
    thread_.detach();
  else
    thread_.join();
}

bool SandboxedExitWait::waiting() {
  std::lock_guard lk(mu_);
  return !done_;
}

void SandboxedExitWait::wait(int out) {
  UniqueFd fd(out);
  std::string answer;
  char buf[512];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    answer.append(buf, static_cast<std::size_t>(n));
  }
  const RunResult r = result_from_status(runner_.wait(pid_));
  const auto code = runsc_wait_exit_code(answer);
  std::function<void(int)> ended;
  bool stopping = false;
  {
    std::lock_guard lk(mu_);
    pid_ = 0;  // reaped: nothing left to kill
    stopping = stopping_;
    if (!stopping && r.ok() && code) ended = ended_;
  }
  if (ended) {
    log_.info("container \"" + id_ + "\": its process ended in the sandbox, exit code " + std::to_string(*code));
    ended(*code);
  } else if (!stopping) {
    log_.warn("container \"" + id_ + "\": runsc wait ended without its exit (" + r.describe() +
              (answer.empty() ? std::string() : ", answered: " + answer.substr(0, 200)) + ")");
  }
  std::lock_guard lk(mu_);
  done_ = true;
}

}  // namespace nvproxy::shim
