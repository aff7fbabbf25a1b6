#include "shim/task/process.h"

#include "common/error.h"
#include "common/fs.h"
#include "common/number.h"
#include "common/process.h"
#include "common/text.h"
#include "shim/task/task_context.h"

namespace nvproxy::shim {

namespace {

constexpr auto kConsoleTimeout = std::chrono::seconds(10);

pid_t read_pid_file(const std::filesystem::path& p) {
  std::string s = read_file(p);
  if (auto pid = parse_number<pid_t>(trim(s)); pid && *pid > 0) return *pid;
  throw Error(Code::Internal, "pid file " + p.string() + " holds " + quote_value(s) + ", not a pid");
}

}  // namespace

pid_t Process::pid() const {
  std::lock_guard lk(mu_);
  return pid_;
}

std::optional<ExitInfo> Process::exit() const {
  std::lock_guard lk(mu_);
  return exit_;
}

void Process::set_exit(ExitInfo e) {
  {
    std::lock_guard lk(mu_);
    if (exit_) return;
    exit_ = e;
  }
  cv_.notify_all();
}

ExitInfo Process::wait() const {
  std::unique_lock lk(mu_);
  ++waiters_;
  cv_.wait(lk, [&] { return exit_.has_value(); });
  --waiters_;
  return *exit_;
}

int Process::waiters() const {
  std::lock_guard lk(mu_);
  return waiters_;
}

void Process::close_stdin() {
  if (io_) io_->close_stdin();
  if (console_) console_->close_stdin();
}

void Process::resize_terminal(unsigned width, unsigned height) {
  // Without a terminal there is nothing to resize; containerd's runc shim answers OK too.
  if (console_) console_->resize(width, height);
}

void Process::drain_io() {
  if (io_) io_->wait_output(kIoDrainTimeout);
  if (console_) console_->wait_output(kIoDrainTimeout);
}

void Process::end_output(std::chrono::milliseconds grace) {
  if (io_) io_->end_output(grace);
}

void Process::launch(const std::filesystem::path& pid_file, const RuntimeCall& runtime_call) {
  ExitBook::Starting starting(ctx_.env.exits);
  pid_t pid;
  try {
    if (!stdio_.terminal) {
      const ContainerSetup& s = ctx_.setup;
      io_ = open_process_io(stdio_, IoOwner{s.id, ctx_.env.ns, &ctx_.env.runner, s.options.io_uid, s.options.io_gid});
      runtime_call("", io_->child_stdio());
    } else {
      // runc connects to the console socket and sends the pty master while create/exec runs; the
      // connection waits in the listen backlog until we accept it right after.
      ConsoleSocket sock;
      runtime_call(sock.path(), oci::Stdio{});
      console_ = std::make_unique<ConsoleIO>(sock.receive_master(kConsoleTimeout), stdio_);
    }
    pid = read_pid_file(pid_file);
  } catch (...) {
    // Nothing runs: let go of the client's FIFOs at once, so that it sees their end (its IO
    // copies wait for it before it can report the failure).
    io_.reset();
    console_.reset();
    throw;
  }
  if (io_) io_->start_copying();
  {
    std::lock_guard lk(mu_);
    pid_ = pid;
  }
  // A runsc container of a CRI pod reports its sandbox's process, which is the pod's sandbox
  // container's to claim: its own end is watched through runsc (InitProcess::run_kill).
  if (exec_id_.empty() && ctx_.setup.shares_sandbox_pid) return;
  // The exit is handled only while the container lives (it owns the context); a process that a
  // waiter holds past its container's end hears nothing more.
  std::weak_ptr<Container> owner = ctx_.owner;
  std::weak_ptr<Process> self = weak_from_this();
  auto early = ctx_.env.exits.claim(pid, [owner, self](int status) {
    auto c = owner.lock();
    auto p = self.lock();
    if (c && p) p->on_exit(status);
  });
  if (early) on_exit(*early);
}

void Process::finish_start(const std::function<void()>& publish_start) {
  std::optional<int> held;
  {
    std::lock_guard lk(ctx_.mu);
    starting_ = false;
    if (publish_start) publish_start();
    held.swap(held_exit_);
  }
  if (held) on_exit(*held);
}

void Process::on_exit(int wait_status) {
  // What the process wrote reaches its client before its exit does: a client told of the exit
  // stops opening its FIFOs (ctr then lost `echo hello` under load).
  if (io_) io_->wait_flushed(kExitFlushLimit);
  before_exit();
  std::lock_guard lk(ctx_.mu);
  if (starting_) {
    if (!held_exit_) held_exit_ = wait_status;
    return;
  }
  if (exit()) return;
  exited_locked(ExitInfo{static_cast<uint32_t>(exit_code_from_status(wait_status)), std::chrono::system_clock::now()});
}

}  // namespace nvproxy::shim
