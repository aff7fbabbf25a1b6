#include "shim/task/container.h"

#include <signal.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "common/error.h"
#include "common/fs.h"
#include "shim/task/console.h"
#include "shim/task/runsc_filestore.h"

namespace nvproxy::shim {

namespace {

constexpr auto kIoDrainTimeout = std::chrono::seconds(2);
constexpr auto kConsoleTimeout = std::chrono::seconds(10);
// The exit status of a task whose restore failed before anything ran: containerd's for a task
// whose process it cannot account for (it publishes 255 for the tasks of a shim that died).
constexpr uint32_t kRestoreFailedStatus = 255;

pid_t read_pid_file(const std::filesystem::path& p) {
  std::string s = read_file(p);
  try {
    return static_cast<pid_t>(std::stol(s));
  } catch (const std::exception&) {
    throw Error(Code::Internal, "pid file " + p.string() + " holds \"" + s + "\", not a pid");
  }
}

}  // namespace

// The work behind an exec's transitions.
class Container::ExecRunner final : public ExecOps {
 public:
  ExecRunner(Container& c, std::shared_ptr<ExecProcess> p) : c_(c), p_(std::move(p)) {}
  [[nodiscard]] std::string describe() const override {
    return "exec \"" + p_->exec_id() + "\" of container \"" + c_.id() + "\"";
  }
  void run_exec() override {
    auto spec_file = c_.bundle() / ("exec-" + p_->exec_id() + ".json");
    auto pid_file = c_.bundle() / ("exec-" + p_->exec_id() + ".pid");
    write_file_atomic(spec_file, p_->spec().dump(), 0600);
    auto cleanup = [&] {
      std::error_code ec;
      std::filesystem::remove(spec_file, ec);
      std::filesystem::remove(pid_file, ec);
    };
    try {
      c_.launch(p_, pid_file, [&](const std::string& console, const oci::Stdio& stdio) {
        c_.runtime_->exec(c_.id(), {.process_json = spec_file, .pid_file = pid_file, .console_socket = console, .stdio = stdio});
      });
    } catch (...) {
      cleanup();
      throw;
    }
    cleanup();
  }
  void send_signal(int signal) override {
    pid_t pid = p_->pid();
    if (pid <= 0) throw Error(Code::NotFound, describe() + " has no process");
    if (::kill(pid, signal) < 0) throw sys_error("kill " + describe() + " pid " + std::to_string(pid));
  }

 private:
  Container& c_;
  std::shared_ptr<ExecProcess> p_;
};

Container::Container(ContainerSetup setup, std::unique_ptr<oci::Runtime> runtime, ContainerEnv env)
    : s_(std::move(setup)),
      runtime_(std::move(runtime)),
      env_(std::move(env)),
      events_(env_.events, s_.id),
      init_(std::make_shared<Process>("", s_.stdio)) {}

Container::~Container() {
  if (pid_t pid = init_->pid(); pid > 0) env_.exits.forget(pid);
}

std::shared_ptr<Container> Container::create(ContainerSetup setup, std::unique_ptr<oci::Runtime> runtime, ContainerEnv env) {
  std::shared_ptr<Container> c(new Container(std::move(setup), std::move(runtime), std::move(env)));
  c->rootfs_.emplace(c->s_.rootfs, c->s_.bundle / "rootfs");
  {
    std::lock_guard lk(c->mu_);
    c->init_->starting_ = true;  // its exit waits for TaskCreate
  }
  if (!c->s_.checkpoint.empty()) {
    c->state_ = &InitState::created_checkpoint();
  } else {
    c->remove_stale_runsc_filestores();
    auto pid_file = c->s_.bundle / "init.pid";
    c->launch(c->init_, pid_file, [&](const std::string& console, const oci::Stdio& stdio) {
      c->runtime_->create(c->id(), {.bundle = c->s_.bundle,
                                    .pid_file = pid_file,
                                    .console_socket = console,
                                    .extra_global = c->s_.runtime_global,
                                    .no_pivot = c->s_.options.no_pivot_root,
                                    .no_new_keyring = c->s_.options.no_new_keyring,
                                    .stdio = stdio});
    });
    c->watch_oom();
  }
  c->finish_start(c->init_,
                  [&] { c->events_.created(c->s_.bundle, c->s_.rootfs, c->s_.stdio, c->s_.checkpoint, c->init_->pid()); });
  return c;
}

void Container::launch(const std::shared_ptr<Process>& p, const std::filesystem::path& pid_file,
                       const std::function<void(const std::string&, const oci::Stdio&)>& runtime_call) {
  ExitBook::Starting starting(env_.exits);
  pid_t pid;
  try {
    if (!p->stdio().terminal) {
      p->set_io(open_process_io(p->stdio(), IoOwner{s_.id, env_.ns, &env_.runner, s_.options.io_uid, s_.options.io_gid}));
      runtime_call("", p->io()->child_stdio());
    } else {
      // runc connects to the console socket and sends the pty master while create/exec runs; the
      // connection waits in the listen backlog until we accept it right after.
      ConsoleSocket sock;
      runtime_call(sock.path(), oci::Stdio{});
      p->set_console(std::make_unique<ConsoleIO>(sock.receive_master(kConsoleTimeout), p->stdio()));
    }
    pid = read_pid_file(pid_file);
  } catch (...) {
    // Nothing runs: let go of the client's FIFOs at once, so that it sees their end (its IO
    // copies wait for it before it can report the failure).
    p->set_io(nullptr);
    p->set_console(nullptr);
    throw;
  }
  if (p->io()) p->io()->start_copying();
  p->set_pid(pid);
  std::weak_ptr<Container> self = weak_from_this();
  std::weak_ptr<Process> wp = p;
  auto early = env_.exits.claim(pid, [self, wp](int status) {
    auto c = self.lock();
    auto proc = wp.lock();
    if (c && proc) c->on_exit(proc, status);
  });
  if (early) on_exit(p, *early);
}

void Container::finish_start(const std::shared_ptr<Process>& p, const std::function<void()>& publish_start) {
  std::optional<int> held;
  {
    std::lock_guard lk(mu_);
    p->starting_ = false;
    if (publish_start) publish_start();
    held.swap(p->held_exit_);
  }
  if (held) on_exit(p, *held);
}

void Container::watch_oom() {
  pid_t pid = init_->pid();
  if (pid > 0) {
    auto cg = oci::cgroup_paths_of(pid);
    std::lock_guard lk(mu_);
    init_cgroup_ = std::move(cg);
  }
  if (env_.oom && pid > 0 && !init_->exit()) env_.oom->add(s_.id, pid);
}

std::optional<oci::CgroupPaths> Container::init_cgroup() const {
  std::lock_guard lk(mu_);
  return init_cgroup_;
}

ProcStatus Container::status(const std::string& exec_id) const {
  std::lock_guard lk(mu_);
  if (exec_id.empty()) return state_->status();
  return find_exec_locked(exec_id)->state_->status();
}

std::shared_ptr<ExecProcess> Container::find_exec_locked(const std::string& exec_id) const {
  auto it = execs_.find(exec_id);
  if (it == execs_.end()) throw Error(Code::NotFound, "exec \"" + exec_id + "\" of container \"" + s_.id + "\" not found");
  return it->second;
}

std::shared_ptr<Process> Container::process(const std::string& exec_id) const {
  if (exec_id.empty()) return init_;
  std::lock_guard lk(mu_);
  return find_exec_locked(exec_id);
}

std::map<std::string, pid_t> Container::exec_pids() const {
  std::lock_guard lk(mu_);
  std::map<std::string, pid_t> out;
  for (const auto& [id, p] : execs_)
    if (pid_t pid = p->pid(); pid > 0) out[id] = pid;
  return out;
}

void Container::apply_init_locked(const InitState* from, const InitState& to) {
  // An exit that came during the operation wins: the operation's target is stale then.
  if (state_ == from) state_ = &to;
}

pid_t Container::start(const std::string& exec_id) {
  std::lock_guard op(op_mu_);
  if (exec_id.empty()) {
    const InitState* from;
    {
      std::lock_guard lk(mu_);
      from = state_;
      init_->starting_ = true;
    }
    try {
      const InitState& to = from->start(*this);
      std::lock_guard lk(mu_);
      apply_init_locked(from, to);
    } catch (...) {
      finish_start(init_, nullptr);
      if (from == &InitState::created_checkpoint()) end_failed_restore();
      throw;
    }
    finish_start(init_, [&] { events_.started(init_->pid()); });
    return init_->pid();
  }
  std::shared_ptr<ExecProcess> ex;
  const ExecState* from;
  {
    std::lock_guard lk(mu_);
    ex = find_exec_locked(exec_id);
    from = ex->state_;
    if (from == &ExecState::created() && !state_->accepts_exec())
      throw Error(Code::Unknown, "container \"" + s_.id + "\" is " + state_->name() + ": cannot start exec \"" + exec_id + "\"");
    ex->starting_ = true;
  }
  ExecRunner ops(*this, ex);
  try {
    const ExecState& to = from->start(ops);
    std::lock_guard lk(mu_);
    if (ex->state_ == from) ex->state_ = &to;
  } catch (...) {
    finish_start(ex, nullptr);
    // Nothing will ever exit: release its waiters with status 0 and no exit time, as
    // containerd's runc shim does for an exec whose start failed.
    if (!ex->exit()) ex->set_exit(ExitInfo{0, {}});
    throw;
  }
  finish_start(ex, [&] { events_.exec_started(exec_id, ex->pid()); });
  return ex->pid();
}

void Container::kill(const std::string& exec_id, int signal, bool all) {
  if (!exec_id.empty()) {
    std::shared_ptr<ExecProcess> ex;
    const ExecState* st;
    {
      std::lock_guard lk(mu_);
      ex = find_exec_locked(exec_id);
      st = ex->state_;
    }
    ExecRunner ops(*this, ex);
    st->kill(ops, signal);
    return;
  }
  std::lock_guard op(op_mu_);
  const InitState* from;
  {
    std::lock_guard lk(mu_);
    from = state_;
  }
  try {
    from->kill(*this, signal, all);
  } catch (const Error&) {
    std::lock_guard lk(mu_);
    // The init exited while the runtime was asked: what the client wanted has happened.
    if (state_->status() == ProcStatus::Stopped)
      throw Error(Code::NotFound, "container \"" + s_.id + "\": process already finished");
    throw;
  }
}

void Container::drive_init(const std::function<const InitState&(const InitState&)>& op, const std::function<void()>& publish) {
  std::lock_guard op_lock(op_mu_);
  const InitState* from;
  {
    std::lock_guard lk(mu_);
    from = state_;
  }
  const InitState& to = op(*from);
  std::lock_guard lk(mu_);
  apply_init_locked(from, to);
  if (publish) publish();
}

void Container::pause() {
  drive_init([&](const InitState& s) -> const InitState& { return s.pause(*this); }, [&] { events_.paused(); });
}

void Container::resume() {
  drive_init([&](const InitState& s) -> const InitState& { return s.resume(*this); }, [&] { events_.resumed(); });
}

void Container::update(const nlohmann::json& resources) {
  drive_init([&](const InitState& s) -> const InitState& { return s.update(*this, resources); }, nullptr);
}

void Container::checkpoint(const oci::CheckpointFlags& flags) {
  drive_init([&](const InitState& s) -> const InitState& { return s.checkpoint(*this, flags); },
             [&] { events_.checkpointed(flags.image_path); });
}

void Container::add_exec(const std::string& exec_id, nlohmann::json spec, StdioPaths stdio) {
  auto ex = std::make_shared<ExecProcess>(exec_id, std::move(stdio), std::move(spec));
  std::lock_guard lk(mu_);
  if (!state_->accepts_exec())
    throw Error(Code::Unknown, "container \"" + s_.id + "\" is " + state_->name() + ": cannot exec \"" + exec_id + "\" in it");
  if (!execs_.emplace(exec_id, ex).second)
    throw Error(Code::AlreadyExists, "exec \"" + exec_id + "\" of container \"" + s_.id + "\" already exists");
  events_.exec_added(exec_id);
}

void Container::resize(const std::string& exec_id, unsigned width, unsigned height) {
  std::shared_ptr<Process> p = init_;
  if (!exec_id.empty()) {
    std::lock_guard lk(mu_);
    auto ex = find_exec_locked(exec_id);
    ExecRunner ops(*this, ex);
    ex->state_->check_resize(ops);
    p = ex;
  }
  p->resize(width, height);
}

std::shared_ptr<Process> Container::remove(const std::string& exec_id) {
  if (!exec_id.empty()) {
    std::shared_ptr<ExecProcess> ex;
    {
      std::lock_guard lk(mu_);
      ex = find_exec_locked(exec_id);
      ExecRunner ops(*this, ex);
      ex->state_ = &ex->state_->remove(ops);
      execs_.erase(exec_id);
    }
    if (pid_t pid = ex->pid(); pid > 0) env_.exits.forget(pid);
    ex->finish_io(kIoDrainTimeout);
    return ex;
  }
  std::lock_guard op(op_mu_);
  const InitState* from;
  {
    std::lock_guard lk(mu_);
    from = state_;
  }
  const InitState& to = from->remove(*this);
  init_->finish_io(kIoDrainTimeout);
  if (env_.oom) env_.oom->remove(s_.id);
  rootfs_.reset();
  std::lock_guard lk(mu_);
  apply_init_locked(from, to);
  state_ = &InitState::deleted();
  // Deleted before it ever ran (or its exit is still held for execs that never ended).
  init_->set_exit(held_init_exit_.value_or(ExitInfo{128 + SIGKILL, std::chrono::system_clock::now()}));
  events_.deleted(init_->pid(), *init_->exit());
  return init_;
}

size_t Container::running_execs_locked() const {
  size_t n = 0;
  for (const auto& [id, p] : execs_)
    if (p->state_ == &ExecState::running() && !p->exit()) ++n;
  return n;
}

void Container::on_exit(const std::shared_ptr<Process>& p, int wait_status) {
  std::lock_guard lk(mu_);
  if (p->starting_) {
    if (!p->held_exit_) p->held_exit_ = wait_status;
    return;
  }
  if (p->exit()) return;
  ExitInfo e{static_cast<uint32_t>(exit_code_from_status(wait_status)), std::chrono::system_clock::now()};
  if (p->is_init()) {
    if (state_ == &InitState::deleted()) {
      p->set_exit(e);
      return;
    }
    // Without its own pid namespace the container's other processes outlive init: end them, as
    // containerd's runc shim does, so that the task really is gone (and its execs exit).
    if (!s_.own_pid_ns) kill_all_async();
    // As in containerd's runc shim, the exits of the container's running execs go out first.
    if (running_execs_locked() > 0) {
      held_init_exit_ = e;
      return;
    }
    finish_init_exit_locked(e);
    return;
  }
  auto& ex = static_cast<ExecProcess&>(*p);
  ex.state_ = &ex.state_->exited();
  p->set_exit(e);
  publish_exit_locked(*p);
  if (held_init_exit_ && running_execs_locked() == 0) {
    ExitInfo held = *held_init_exit_;
    held_init_exit_.reset();
    finish_init_exit_locked(held);
  }
}

void Container::end_failed_restore() {
  std::lock_guard lk(mu_);
  if (init_->exit() || state_ != &InitState::created_checkpoint()) return;
  if (init_->pid() > 0) {
    // The runtime restored processes (CUDA then failed and they were removed): their exit comes
    // through the reaper, and until then a kill must reach whatever still runs.
    state_ = &InitState::running();
    return;
  }
  // Nothing ever ran and nothing will: the task ends as a process that ended, so that Kill answers
  // as for a stopped task and Wait returns (containerd's force delete, CRI's cleanup after a
  // failed start and the client's WithProcessKill wait for this exit).
  state_ = &InitState::stopped();
  init_->set_exit(ExitInfo{kRestoreFailedStatus, std::chrono::system_clock::now()});
  publish_exit_locked(*init_);
}

void Container::finish_init_exit_locked(ExitInfo e) {
  state_ = &state_->exited();
  init_->set_exit(e);
  publish_exit_locked(*init_);
}

void Container::publish_exit_locked(const Process& p) {
  events_.exited(p.is_init() ? s_.id : p.exec_id(), p.pid(), *p.exit());
}

void Container::kill_all_async() {
  // The reaper's thread must not wait for a runtime command (the runtime's exit comes through it);
  // the thread holds the container, so the runtime outlives the call.
  std::thread([self = shared_from_this()] {
    try {
      self->runtime_->kill(self->id(), SIGKILL, true);
    } catch (const std::exception& e) {
      self->env_.log.debug("container \"" + self->id() + "\": kill --all after init's exit: " + e.what());
    }
  }).detach();
}

// InitOps: the runtime work behind the init's transitions.

void Container::run_start() {
  runtime_->start(s_.id);
}

void Container::remove_stale_runsc_filestores() {
  // A rootfs the client prepared itself (no mounts from containerd) may be shared: left alone.
  if (runtime_->kind() != oci::RuntimeKind::Runsc || s_.rootfs.empty()) return;
  auto rootfs = s_.bundle / "rootfs";
  std::vector<std::string> removed;
  try {
    removed = remove_stale_filestores(rootfs);
  } catch (const std::exception& e) {
    throw Error(Code::Internal, "container \"" + s_.id + "\": " + e.what());
  }
  for (const auto& name : removed)
    env_.log.info("container \"" + s_.id + "\": removed the stale runsc filestore " + (rootfs / name).string() +
                  " (brought by the rootfs diff; runsc creates its own)");
}

void Container::run_restore() {
  env_.checkpoints.before_restore(*this, s_.checkpoint);
  remove_stale_runsc_filestores();
  auto pid_file = s_.bundle / "init.pid";
  launch(init_, pid_file, [&](const std::string& console, const oci::Stdio& stdio) {
    runtime_->restore(s_.id, {.bundle = s_.bundle,
                              .image_path = s_.checkpoint,
                              .work_path = s_.options.criu_work_path.empty() ? s_.bundle / "criu-work"
                                                                             : std::filesystem::path(s_.options.criu_work_path),
                              .pid_file = pid_file,
                              .console_socket = console,
                              .extra_global = s_.runtime_global,
                              .no_pivot = s_.options.no_pivot_root,
                              .stdio = stdio});
  });
  watch_oom();
  try {
    env_.checkpoints.after_restore(*this, s_.checkpoint);
  } catch (const Error& e) {
    // The runtime restored the processes but CUDA did not come back in all of them: the task's
    // start fails, so nothing of it may keep running behind containerd's back (Delete would not
    // remove a running container).
    std::string aftermath;
    try {
      runtime_->remove(s_.id, true);
      aftermath = "removed the restored container (" + std::string(oci::runtime_kind_name(runtime_->kind())) + " delete --force)";
    } catch (const std::exception& de) {
      aftermath = "could not remove the restored container: " + std::string(de.what());
    }
    throw Error(e.code(), std::string(e.what()) + "; " + aftermath);
  }
}

void Container::run_kill(int signal, bool all) {
  try {
    runtime_->kill(s_.id, signal, all);
  } catch (const Error& e) {
    // The runtime cannot kill it (its binary gone, its state unreadable): a SIGKILL still ends the
    // container, through its init's pid (under runsc the sandbox process), so that nothing of it
    // outlives its Delete. Not for a pid that other containers share.
    pid_t pid = init_->pid();
    if (signal != SIGKILL || e.code() == Code::NotFound || s_.shares_sandbox_pid || pid <= 0 || init_->exit()) throw;
    if (::kill(pid, SIGKILL) < 0)
      throw Error(e.code(), std::string(e.what()) + "; killing its init (pid " + std::to_string(pid) +
                                ") failed too: " + std::strerror(errno));
    env_.log.warn(std::string(e.what()) + "; killed its init (pid " + std::to_string(pid) + ") instead");
  }
}
void Container::run_pause() {
  runtime_->pause(s_.id);
}
void Container::run_resume() {
  runtime_->resume(s_.id);
}
void Container::run_update(const nlohmann::json& resources) {
  runtime_->update(s_.id, resources);
}

void Container::run_checkpoint(const oci::CheckpointFlags& flags, bool paused) {
  oci::CheckpointFlags f = flags;
  // CRIU's log stays in the bundle (the image directory may go with a failed request), where a
  // failure's message quotes it from.
  if (f.work_path.empty() && runtime_->kind() != oci::RuntimeKind::Runsc) {
    f.work_path = (s_.bundle / "criu-work").string();
    std::error_code ec;
    std::filesystem::create_directories(f.work_path, ec);
  }
  env_.checkpoints.checkpoint(*this, f, paused);
}

void Container::run_delete() {
  try {
    runtime_->remove(s_.id, true);
  } catch (const Error& e) {
    // Nothing to delete is fine (a restore that never ran, a runtime that already cleaned up).
    if (e.code() != Code::NotFound) env_.log.warn(e.what());
  }
}

}  // namespace nvproxy::shim
