#include "shim/task/init_process.h"

#include <signal.h>

#include <cerrno>
#include <cstring>
#include <string_view>
#include <thread>

#include "common/error.h"
#include "oci/replica_cgroup.h"
#include "oci/spec.h"
#include "shim/task/exec_table.h"
#include "shim/task/pod_restore_nvproxy.h"
#include "shim/task/restore_annotation.h"
#include "shim/task/rootfs_diff.h"
#include "shim/task/runsc_filestore.h"
#include "shim/task/runsc_root.h"
#include "shim/task/task_context.h"

namespace nvproxy::shim {

namespace {

// The exit status of a task whose restore failed before anything ran: containerd's for a task
// whose process it cannot account for (it publishes 255 for the tasks of a shim that died).
constexpr uint32_t kRestoreFailedStatus = 255;
// How long a killed container of a runsc pod is watched for its end (watch_sandboxed_exit).
constexpr std::chrono::seconds kSandboxedExitWait{30};

}  // namespace

InitProcess::InitProcess(TaskContext& ctx, const ExecTable& execs) : Process(ctx, "", ctx.setup.stdio), execs_(execs) {}

void InitProcess::create() {
  const ContainerSetup& s = ctx_.setup;
  ctx_.rootfs.emplace(s.rootfs, s.bundle / "rootfs");
  if (!s.restore_reference.empty()) fetch_for_restore();
  {
    std::lock_guard lk(ctx_.mu);
    begin_start_locked();  // its exit waits for TaskCreate
    if (!s.checkpoint.empty()) state_ = &InitState::created_checkpoint();
  }
  if (s.checkpoint.empty()) {
    remove_stale_runsc_filestores();
    auto pid_file = s.bundle / "init.pid";
    launch(pid_file, [&](const std::string& console, const oci::Stdio& stdio) {
      ctx_.runtime->create(s.id, {.bundle = s.bundle,
                                  .pid_file = pid_file,
                                  .console_socket = console,
                                  .extra_global = s.runtime_global,
                                  .no_pivot = s.options.no_pivot_root,
                                  .no_new_keyring = s.options.no_new_keyring,
                                  .stdio = stdio});
    });
    watch_oom();
  }
  finish_start([&] { ctx_.events.created(s.bundle, s.rootfs, s.stdio, s.checkpoint, pid()); });
}

void InitProcess::fetch_for_restore() {
  const ContainerSetup& s = ctx_.setup;
  const std::filesystem::path into = s.bundle / kRestoreDir;
  const std::string who = "create of container \"" + s.id + "\" from " + s.restore_reference + ": ";
  try {
    const std::filesystem::path archive = ctx_.env.checkpoints.fetch_for_restore(ctx_.container, s.restore_reference, into);
    // A gVisor pod's writes live in its sandbox's overlay, which runsc's image holds: the archive's
    // writable layer (one container's, with runsc's filestore in it) is not put back.
    if (s.pod_restore) return;
    // The writable layer as it was: CRIU reopens the files the processes had open in it.
    RootfsDiffResult r = apply_rootfs_diff(archive, s.bundle / "rootfs", ctx_.env.runner, who);
    ctx_.env.log.info(who + "the writable layer's changes put back (" + std::to_string(r.entries) + " entries, " +
                      std::to_string(r.removed) + " removed)");
  } catch (...) {
    std::error_code ec;
    std::filesystem::remove_all(into, ec);
    throw;
  }
}

ProcStatus InitProcess::status() const {
  std::lock_guard lk(ctx_.mu);
  return state_->status();
}

std::optional<cgroup::CgroupPaths> InitProcess::cgroup() const {
  std::lock_guard lk(ctx_.mu);
  return cgroup_;
}

void InitProcess::check_accepts_exec_locked(const std::string& what) const {
  if (!state_->accepts_exec())
    throw Error(Code::Unknown, "container \"" + ctx_.setup.id + "\" is " + state_->name() + ": cannot " + what);
}

void InitProcess::apply_locked(const InitState* from, const InitState& to) {
  // An exit that came during the operation wins: the operation's target is stale then.
  if (state_ == from) state_ = &to;
}

pid_t InitProcess::start() {
  std::lock_guard op(ctx_.op_mu);
  const InitState* from;
  {
    std::lock_guard lk(ctx_.mu);
    from = state_;
    begin_start_locked();
  }
  try {
    const InitState& to = from->start(*this);
    std::lock_guard lk(ctx_.mu);
    apply_locked(from, to);
  } catch (...) {
    finish_start(nullptr);
    if (from == &InitState::created_checkpoint()) end_failed_restore();
    throw;
  }
  finish_start([&] { ctx_.events.started(pid()); });
  return pid();
}

void InitProcess::kill(int signal, bool all) {
  std::lock_guard op(ctx_.op_mu);
  const InitState* from;
  {
    std::lock_guard lk(ctx_.mu);
    from = state_;
  }
  try {
    from->kill(*this, signal, all);
  } catch (const Error&) {
    std::lock_guard lk(ctx_.mu);
    // The init exited while the runtime was asked: what the client wanted has happened.
    if (state_->status() == ProcStatus::Stopped)
      throw Error(Code::NotFound, "container \"" + ctx_.setup.id + "\": process already finished");
    throw;
  }
}

void InitProcess::resize(unsigned width, unsigned height) {
  resize_terminal(width, height);
}

void InitProcess::drive(const std::function<const InitState&(const InitState&)>& op, const std::function<void()>& publish) {
  std::lock_guard op_lock(ctx_.op_mu);
  const InitState* from;
  {
    std::lock_guard lk(ctx_.mu);
    from = state_;
  }
  const InitState& to = op(*from);
  std::lock_guard lk(ctx_.mu);
  apply_locked(from, to);
  if (publish) publish();
}

void InitProcess::pause() {
  drive([&](const InitState& s) -> const InitState& { return s.pause(*this); }, [&] { ctx_.events.paused(); });
}

void InitProcess::resume() {
  drive([&](const InitState& s) -> const InitState& { return s.resume(*this); }, [&] { ctx_.events.resumed(); });
}

void InitProcess::update(const nlohmann::json& resources) {
  drive([&](const InitState& s) -> const InitState& { return s.update(*this, resources); }, nullptr);
}

void InitProcess::checkpoint(const oci::CheckpointFlags& flags) {
  drive([&](const InitState& s) -> const InitState& { return s.checkpoint(*this, flags); },
        [&] { ctx_.events.checkpointed(flags.image_path); });
}

void InitProcess::remove() {
  std::lock_guard op(ctx_.op_mu);
  const InitState* from;
  {
    std::lock_guard lk(ctx_.mu);
    from = state_;
  }
  const InitState& to = from->remove(*this);
  drain_io();
  if (ctx_.env.oom) ctx_.env.oom->remove(ctx_.setup.id);
  ctx_.rootfs.reset();
  std::lock_guard lk(ctx_.mu);
  apply_locked(from, to);
  state_ = &InitState::deleted();
  // Deleted before it ever ran (or its exit is still held for execs that never ended).
  set_exit(held_exit_.value_or(ExitInfo{128 + SIGKILL, std::chrono::system_clock::now()}));
  ctx_.events.deleted(pid(), *exit());
}

void InitProcess::exited_locked(ExitInfo e) {
  // A container of a runsc pod holds no process of its own whose end closes its output pipes:
  // the pod's sandbox holds their write ends, and after a restore it keeps those that no restored
  // process took (a command that sent its output elsewhere, `exec ... >log 2>&1`) until the pod's
  // end. containerd's client waits for the output to end before it deletes the task, so CRI
  // could never stop the pod: the output ends at most kIoDrainTimeout after the exit, what the
  // pipes hold then copied.
  if (ctx_.setup.shares_sandbox_pid) end_output(kIoDrainTimeout);
  if (state_ == &InitState::deleted()) {
    set_exit(e);
    return;
  }
  held_exit_ = e;
  // Without its own pid namespace the container's other processes outlive init: end them before
  // the exit goes out, as containerd's runc shim does, so that a client that waits for the exit
  // finds nothing of the task left (and its execs' exits go out first).
  if (!ctx_.setup.own_pid_ns && kill_all_async()) {
    killing_all_ = true;
    return;
  }
  report_held_exit_locked();
}

void InitProcess::report_held_exit_locked() {
  // As in containerd's runc shim, the exits of the container's running execs go out first.
  if (!held_exit_ || killing_all_ || execs_.running_locked() > 0) return;
  ExitInfo held = *held_exit_;
  held_exit_.reset();
  finish_exit_locked(held);
}

void InitProcess::before_exit() {
  if (ctx_.env.oom) ctx_.env.oom->poll(ctx_.setup.id);
}

void InitProcess::exec_exited_locked() {
  report_held_exit_locked();
}

void InitProcess::finish_exit_locked(ExitInfo e) {
  state_ = &state_->exited();
  set_exit(e);
  ctx_.events.exited(ctx_.setup.id, pid(), e);
}

void InitProcess::end_failed_restore() {
  std::lock_guard lk(ctx_.mu);
  if (exit() || state_ != &InitState::created_checkpoint()) return;
  if (pid() > 0) {
    // The runtime restored processes (CUDA then failed and they were removed): their exit comes
    // through the reaper, and until then a kill must reach whatever still runs.
    state_ = &InitState::running();
    return;
  }
  // Nothing ever ran and nothing will: the task ends as a process that ended, so that Kill answers
  // as for a stopped task and Wait returns (containerd's force delete, CRI's cleanup after a
  // failed start and the client's WithProcessKill wait for this exit).
  state_ = &InitState::stopped();
  set_exit(ExitInfo{kRestoreFailedStatus, std::chrono::system_clock::now()});
  ctx_.events.exited(ctx_.setup.id, pid(), *exit());
}

bool InitProcess::kill_all_async() {
  // The reaper's thread must not wait for a runtime command (the runtime's exit comes through it);
  // the thread holds the container, so the runtime and this init outlive the call.
  auto keep = ctx_.owner.lock();
  if (!keep) return false;  // the container is going: its delete ends what runs
  std::thread([this, keep = std::move(keep)] {
    try {
      ctx_.runtime->kill(ctx_.setup.id, SIGKILL, true);
    } catch (const std::exception& e) {
      ctx_.env.log.debug("container \"" + ctx_.setup.id + "\": kill --all after init's exit: " + e.what());
    }
    std::lock_guard lk(ctx_.mu);
    killing_all_ = false;
    if (state_ != &InitState::deleted()) report_held_exit_locked();
  }).detach();
  return true;
}

void InitProcess::watch_sandboxed_exit(int signal) {
  auto keep = ctx_.owner.lock();
  if (!keep) return;  // the container is going: its delete ends what runs
  {
    std::lock_guard lk(ctx_.mu);
    last_signal_ = signal;
    if (watching_exit_ || exit()) return;
    watching_exit_ = true;
  }
  std::thread([this, keep = std::move(keep)] {
    const auto until = std::chrono::steady_clock::now() + kSandboxedExitWait;
    bool stopped = false;
    std::string last_error;
    while (!stopped && std::chrono::steady_clock::now() < until) {
      try {
        stopped = ctx_.runtime->state(ctx_.setup.id).status == "stopped";
      } catch (const Error& e) {
        stopped = e.code() == Code::NotFound;
        last_error = e.what();
      } catch (const std::exception& e) {
        last_error = e.what();
      }
      if (!stopped) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    int signal;
    {
      std::lock_guard lk(ctx_.mu);
      watching_exit_ = false;
      signal = last_signal_;
    }
    if (!stopped) {
      ctx_.env.log.warn("container \"" + ctx_.setup.id + "\": still running " + std::to_string(kSandboxedExitWait.count()) +
                        " s after signal " + std::to_string(signal) + (last_error.empty() ? "" : " (" + last_error + ")"));
      return;
    }
    ctx_.env.log.info("container \"" + ctx_.setup.id + "\": stopped after signal " + std::to_string(signal) +
                      (last_error.empty() ? "" : " (" + last_error + ")"));
    try {
      on_exit(signal & 0x7f);  // a wait status: killed by `signal`
    } catch (const std::exception& e) {
      ctx_.env.log.warn("container \"" + ctx_.setup.id + "\": its exit: " + e.what());
    }
  }).detach();
}

void InitProcess::wait_in_sandbox() {
  if (!ctx_.setup.shares_sandbox_pid) return;
  std::weak_ptr<Container> owner = ctx_.owner;
  std::unique_ptr<SandboxedExitWait> w;
  try {
    w = std::make_unique<SandboxedExitWait>(ctx_.env.runner, ctx_.env.log, ctx_.setup.id, ctx_.runtime->wait_argv(ctx_.setup.id),
                                            [this, owner](int code) {
                                              auto keep = owner.lock();
                                              if (!keep) return;  // the container is going
                                              // As a wait status: killed (128+signal) or exited.
                                              on_exit(code > 128 && code < 128 + 65 ? code - 128 : code << 8);
                                            });
  } catch (const std::exception& e) {
    ctx_.env.log.warn("container \"" + ctx_.setup.id + "\": its end is heard only after a kill: " + e.what());
    return;
  }
  std::unique_ptr<SandboxedExitWait> old;
  std::lock_guard lk(ctx_.mu);
  old = std::exchange(exit_wait_, std::move(w));
}

void InitProcess::stop_waiting_in_sandbox() {
  std::unique_ptr<SandboxedExitWait> w;
  {
    std::lock_guard lk(ctx_.mu);
    w = std::move(exit_wait_);
  }
  // Joined outside the lock: a wait that just heard the exit takes it in on_exit.
}

void InitProcess::watch_oom() {
  pid_t pid = this->pid();
  if (pid > 0) {
    auto cg = cgroup::cgroup_paths_of(pid);
    std::lock_guard lk(ctx_.mu);
    cgroup_ = std::move(cg);
  }
  if (ctx_.env.oom && pid > 0 && !exit()) ctx_.env.oom->add(ctx_.setup.id, pid);
}

void InitProcess::remove_stale_runsc_filestores() {
  const ContainerSetup& s = ctx_.setup;
  // A rootfs the client prepared itself (no mounts from containerd) may be shared: left alone.
  if (ctx_.runtime->kind() != oci::RuntimeKind::Runsc || s.rootfs.empty()) return;
  auto rootfs = s.bundle / "rootfs";
  std::vector<std::string> removed;
  try {
    removed = remove_stale_filestores(rootfs);
  } catch (const std::exception& e) {
    throw Error(Code::Internal, "container \"" + s.id + "\": " + e.what());
  }
  for (const auto& name : removed)
    ctx_.env.log.info("container \"" + s.id + "\": removed the stale runsc filestore " + (rootfs / name).string() +
                      " (brought by the rootfs diff; runsc creates its own)");
}

// InitOps: the runtime work behind the init's transitions.

const std::string& InitProcess::container_id() const {
  return ctx_.setup.id;
}

void InitProcess::run_start() {
  ctx_.runtime->start(ctx_.setup.id);
  wait_in_sandbox();
}

void InitProcess::run_restore() {
  const ContainerSetup& s = ctx_.setup;
  oci::Runtime& rt = *ctx_.runtime;
  // The checkpoint session owns the restore (checkpoint/session/session.h); the runtime's part runs here,
  // where the task's process, its stdio and its pid are.
  ctx_.env.checkpoints.restore(
      ctx_.container, s.checkpoint, [&](const std::filesystem::path& image, bool leave_stopped, const std::string& taken_from) {
        remove_stale_runsc_filestores();
        own_cgroup_of_replica(taken_from);
        auto pid_file = s.bundle / "init.pid";
        launch(pid_file, [&](const std::string& console, const oci::Stdio& stdio) {
          rt.restore(s.id, {.bundle = s.bundle,
                            .image_path = image,
                            .work_path = s.options.criu_work_path.empty() ? s.bundle / "criu-work"
                                                                          : std::filesystem::path(s.options.criu_work_path),
                            .pid_file = pid_file,
                            .console_socket = console,
                            .extra_global = pod_sandbox_restore_flags(s, image, ctx_.env.log),
                            .no_pivot = s.options.no_pivot_root,
                            .stdio = stdio,
                            .leave_stopped = leave_stopped});
        });
        watch_oom();
      });
  wait_in_sandbox();
}

// A spec handed over as the image's (ctr restores into a new container so) names the cgroup of the
// container the image was taken from: the replica gets its own before the runtime creates it.
void InitProcess::own_cgroup_of_replica(const std::string& taken_from) {
  const ContainerSetup& s = ctx_.setup;
  if (taken_from.empty() || taken_from == s.id) return;
  oci::Spec spec = oci::Spec::load(s.bundle);
  if (auto said = oci::give_replica_its_cgroup(spec.json(), taken_from, s.id)) {
    spec.save(s.bundle);
    ctx_.env.log.info("restore of \"" + s.id + "\": " + *said);
  }
}

void InitProcess::run_kill(int signal, bool all) {
  try {
    ctx_.runtime->kill(ctx_.setup.id, signal, all);
    if (ctx_.setup.shares_sandbox_pid) watch_sandboxed_exit(signal);
  } catch (const Error& e) {
    // runsc answers a container whose processes are all gone as not found: it ends all the same.
    if (ctx_.setup.shares_sandbox_pid) watch_sandboxed_exit(signal);
    // The runtime cannot kill it (its binary gone, its state unreadable): a SIGKILL still ends the
    // container, through its init's pid (under runsc the sandbox process), so that nothing of it
    // outlives its Delete. Not for a pid that other containers share.
    pid_t pid = this->pid();
    if (signal != SIGKILL || e.code() == Code::NotFound || ctx_.setup.shares_sandbox_pid || pid <= 0 || exit()) throw;
    if (::kill(pid, SIGKILL) < 0)
      throw Error(e.code(), std::string(e.what()) + "; killing its init (pid " + std::to_string(pid) +
                                ") failed too: " + std::strerror(errno));
    ctx_.env.log.warn(std::string(e.what()) + "; killed its init (pid " + std::to_string(pid) + ") instead");
  }
}

void InitProcess::run_pause() {
  // The cgroup v1 freezer gives up on busy tasks under load (runc: "unable to freeze", the
  // container thawed again and running); a second try mostly succeeds. Three tries, each with the
  // runtime's own deadline; any other error is the answer.
  constexpr int kAttempts = 3;
  for (int attempt = 1;; ++attempt) {
    try {
      ctx_.runtime->pause(ctx_.setup.id);
      return;
    } catch (const std::exception& e) {
      if (attempt == kAttempts || std::string_view(e.what()).find("unable to freeze") == std::string_view::npos) throw;
      ctx_.env.log.warn("container \"" + ctx_.setup.id + "\": pause, try " + std::to_string(attempt) + ": " + e.what() +
                        "; trying again");
    }
  }
}

void InitProcess::run_resume() {
  try {
    ctx_.runtime->resume(ctx_.setup.id);
  } catch (const std::exception& e) {
    // What resume asks for may be so already: a checkpoint thawed the container for its CUDA
    // toggles and could not freeze it again (runc's "unable to freeze" under load). The runtime's
    // own state decides; a container that runs is resumed.
    std::string status;
    try {
      status = ctx_.runtime->state(ctx_.setup.id).status;
    } catch (const std::exception&) {
      // unknown (empty): the resume's own error is the one to see
    }
    if (status != "running") throw;
    ctx_.env.log.warn("container \"" + ctx_.setup.id + "\": resume: " + e.what() + "; the runtime says it runs: resumed");
  }
}

void InitProcess::run_update(const nlohmann::json& resources) {
  ctx_.runtime->update(ctx_.setup.id, resources);
}

void InitProcess::run_checkpoint(const oci::CheckpointFlags& flags, bool paused) {
  // The client's options as they came: the snapshot's own choices (CRIU's work directory, zero
  // pages, the pod's /dev/shm) and checkpoint.image_store are the session's (checkpoint_wiring.h).
  ctx_.env.checkpoints.checkpoint(ctx_.container, flags, paused);
}

void InitProcess::run_delete() {
  stop_waiting_in_sandbox();
  try {
    ctx_.runtime->remove(ctx_.setup.id, true);
  } catch (const Error& e) {
    // Nothing to delete is fine (a restore that never ran, a runtime that already cleaned up).
    if (e.code() != Code::NotFound) ctx_.env.log.warn(e.what());
  }
  if (remove_runsc_sandbox_root(ctx_.runtime->config(), ctx_.setup.id))
    ctx_.env.log.debug("container \"" + ctx_.setup.id + "\": removed its sandbox's runsc root " + ctx_.runtime->config().root);
}

}  // namespace nvproxy::shim
