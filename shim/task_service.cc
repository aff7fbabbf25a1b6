#include "shim/task_service.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "common/error.h"
#include "common/fs.h"
#include "common/validate.h"
#include "oci/spec.h"
#include "proto/events.pb.h"
#include "proto/runc_options.pb.h"
#include "shim/checkpoint_flow.h"
#include "shim/container.h"
#include "shim/gpu_setup.h"
#include "shim/rootfs.h"
#include "shim/runtime_record.h"
#include "shim/stats.h"
#include "shim/task_options.h"
#include "shim/timestamp.h"
#include "shim/version.h"

namespace nvproxy::shim {

namespace task = containerd::task::v2;
namespace events = containerd::events;
using containerd::v1::types::Status;

namespace {

constexpr auto kIoDrainTimeout = std::chrono::seconds(2);

Status to_proto(ProcStatus s) {
  switch (s) {
    case ProcStatus::Created: return containerd::v1::types::CREATED;
    case ProcStatus::Running: return containerd::v1::types::RUNNING;
    case ProcStatus::Paused: return containerd::v1::types::PAUSED;
    case ProcStatus::Stopped: return containerd::v1::types::STOPPED;
  }
  return containerd::v1::types::UNKNOWN;
}

pid_t read_pid_file(const std::filesystem::path& p) {
  std::string s = read_file(p);
  try {
    return static_cast<pid_t>(std::stol(s));
  } catch (const std::exception&) {
    throw Error(Code::Internal, "pid file " + p.string() + " holds \"" + s + "\", not a pid");
  }
}

}  // namespace

TaskService::TaskService(ServiceEnv env) : env_(std::move(env)) {
  oom_ = std::make_unique<OomWatcher>(env_.log, [this](const std::string& id) {
    events::TaskOOM ev;
    ev.set_container_id(id);
    env_.events.publish("/tasks/oom", ev);
  });
}
TaskService::~TaskService() {
  oom_.reset();
}

void TaskService::watch_oom(const Container& c) {
  // runsc's processes live in the sandbox: its cgroup is the sandbox's, watched by nobody here.
  if (c.runtime->kind() != oci::RuntimeKind::Runsc && c.init.pid > 0) oom_->add(c.id, c.init.pid);
}

void TaskService::start_with_stdio(
    Container& c, Process& p, const std::filesystem::path& pid_file,
    const std::function<void(const std::string& console_socket, const oci::Stdio& stdio)>& run_runtime) {
  if (!p.stdio.terminal) {
    start_process_locked_out(
        c, p, [&] { run_runtime("", p.io->child_stdio()); }, pid_file);
    return;
  }
  // runc connects to the console socket and sends the pty master while `create`/`exec` runs;
  // the connection waits in the listen backlog until we accept it right after.
  ConsoleSocket sock;
  start_process_locked_out(
      c, p,
      [&] {
        run_runtime(sock.path(), oci::Stdio{});
        p.console = std::make_unique<ConsoleIO>(sock.receive_master(std::chrono::seconds(10)), p.stdio);
      },
      pid_file);
}

std::shared_ptr<Container> TaskService::find(const std::string& id) {
  std::lock_guard lk(mu_);
  auto it = containers_.find(id);
  if (it == containers_.end()) throw Error(Code::NotFound, "container \"" + id + "\" not found in this shim");
  return it->second;
}

Process& TaskService::find_process(Container& c, const std::string& exec_id) {
  if (exec_id.empty()) return c.init;
  auto it = c.execs.find(exec_id);
  if (it == c.execs.end()) throw Error(Code::NotFound, "exec \"" + exec_id + "\" of container \"" + c.id + "\" not found");
  return *it->second;
}

task::CreateTaskResponse TaskService::create(const task::CreateTaskRequest& r) {
  validate_id("container id", r.id());
  std::filesystem::path bundle = r.bundle();
  if (!bundle.is_absolute()) throw Error(Code::InvalidArgument, "bundle path \"" + r.bundle() + "\" is not absolute");
  {
    std::lock_guard lk(mu_);
    if (containers_.count(r.id())) throw Error(Code::AlreadyExists, "container \"" + r.id() + "\" already exists in this shim");
  }
  auto c = std::make_shared<Container>();
  c->id = r.id();
  c->bundle = bundle;

  TaskOptions opts;
  if (r.has_options()) opts = decode_task_options(r.options(), "create of container \"" + r.id() + "\"");
  c->config = load_config(opts.config_path);
  apply_task_options(opts, c->config.runtime);
  c->options = opts;
  if (!c->config.runtime.root.empty()) c->config.runtime.root += "/" + env_.ns;
  env_.log.set_level(c->config.log_level);

  oci::Spec spec = oci::Spec::load(bundle);
  c->own_pid_ns = spec.own_pid_namespace();
  c->gpu = prepare_gpu(*c, spec, env_);

  c->runtime = std::make_unique<oci::Runtime>(c->config.runtime, env_.runner, env_.log, bundle / "log.json");
  write_runtime_record(bundle, c->config.runtime);

  std::vector<MountSpec> mounts;
  for (const auto& m : r.rootfs()) mounts.push_back({m.type(), m.source(), m.target(), {m.options().begin(), m.options().end()}});
  if (!mounts.empty()) {
    mount_rootfs(mounts, bundle / "rootfs");
    c->rootfs_mounted = true;
  }

  c->init.stdio = {r.stdin(), r.stdout(), r.stderr(), r.terminal()};
  {
    // Registered before the runtime runs so that an immediate exit of init finds its container.
    std::lock_guard lk(mu_);
    if (!containers_.emplace(c->id, c).second) {
      if (c->rootfs_mounted) unmount_all(bundle / "rootfs");
      throw Error(Code::AlreadyExists, "container \"" + r.id() + "\" already exists in this shim");
    }
  }
  auto forget = [&] {
    std::lock_guard lk(mu_);
    containers_.erase(c->id);
  };
  try {
    if (!r.terminal()) c->init.io = std::make_unique<PipeIO>(c->init.stdio);
    // containerd turns a runc-typed criu_image_path into `checkpoint` only for runc runtime names.
    std::string restore_from = r.checkpoint().empty() ? opts.criu_image_path : r.checkpoint();
    if (!restore_from.empty()) {
      c->restore_from = restore_from;  // the runtime restore runs at Start, as in containerd's runc shim
    } else {
      auto pid_file = bundle / "init.pid";
      start_with_stdio(*c, c->init, pid_file, [&](const std::string& console, const oci::Stdio& stdio) {
        oci::CreateOptions o{
            .bundle = bundle, .pid_file = pid_file, .console_socket = console,
                             .extra_global = c->runtime_global,
                             .no_pivot = opts.no_pivot_root,
                             .no_new_keyring = opts.no_new_keyring,
                             .stdio = stdio};
        c->runtime->create(c->id, o);
      });
      watch_oom(*c);
    }
  } catch (...) {
    forget();
    c->init.io.reset();
    c->init.console.reset();
    if (c->rootfs_mounted) unmount_all(bundle / "rootfs");
    throw;
  }
  events::TaskCreate ev;
  ev.set_container_id(c->id);
  ev.set_bundle(bundle.string());
  *ev.mutable_rootfs() = r.rootfs();
  ev.mutable_io()->set_stdin(r.stdin());
  ev.mutable_io()->set_stdout(r.stdout());
  ev.mutable_io()->set_stderr(r.stderr());
  ev.mutable_io()->set_terminal(r.terminal());
  ev.set_checkpoint(r.checkpoint());
  ev.set_pid(static_cast<uint32_t>(c->init.pid));
  env_.events.publish("/tasks/create", ev);
  env_.log.info("created container \"" + c->id + "\" pid " + std::to_string(c->init.pid) + " with " + c->config.runtime.binary +
                (c->gpu ? " (GPU)" : ""));
  task::CreateTaskResponse resp;
  resp.set_pid(static_cast<uint32_t>(c->init.pid));
  return resp;
}

// Runs a runtime command that starts a process and writes its pid file, matching an exit that
// the reaper may see before the pid is known.
pid_t TaskService::start_process_locked_out(Container& c, Process& p, const std::function<void()>& run_runtime,
                                            const std::filesystem::path& pid_file) {
  {
    std::lock_guard lk(mu_);
    ++starting_;
  }
  auto done = [&] {
    std::lock_guard lk(mu_);
    if (--starting_ == 0) early_exits_.clear();
  };
  try {
    run_runtime();
    pid_t pid = read_pid_file(pid_file);
    if (p.io) p.io->start_copying();
    std::lock_guard lk(mu_);
    p.pid = pid;
    auto it = early_exits_.find(pid);
    if (it != early_exits_.end()) {
      record_exit(c, p, it->second);
      early_exits_.erase(it);
    }
  } catch (...) {
    done();
    throw;
  }
  done();
  return p.pid;
}

task::StartResponse TaskService::start(const task::StartRequest& r) {
  auto c = find(r.id());
  std::lock_guard op(c->op_mu);
  task::StartResponse resp;
  if (r.exec_id().empty()) {
    if (!c->restore_from.empty()) {
      auto pid_file = c->bundle / "init.pid";
      start_with_stdio(*c, c->init, pid_file, [&](const std::string& console, const oci::Stdio& stdio) {
        oci::RestoreOptions o{.bundle = c->bundle,
                              .image_path = c->restore_from,
                              .work_path = c->options.criu_work_path.empty() ? c->bundle / "criu-work"
                                                                             : std::filesystem::path(c->options.criu_work_path),
                              .pid_file = pid_file,
                              .console_socket = console,
                              .extra_global = c->runtime_global,
                              .no_pivot = c->options.no_pivot_root,
                              .stdio = stdio};
        c->runtime->restore(c->id, o);
      });
      watch_oom(*c);
      cuda_restore_after_start(*c);
      c->restore_from.clear();
    } else {
      {
        std::lock_guard lk(mu_);
        if (c->init.status != ProcStatus::Created)
          throw Error(Code::FailedPrecondition, "container \"" + c->id + "\" is not in the created state");
      }
      c->runtime->start(c->id);
    }
    std::lock_guard lk(mu_);
    if (c->init.status == ProcStatus::Created) c->init.status = ProcStatus::Running;
    resp.set_pid(static_cast<uint32_t>(c->init.pid));
    events::TaskStart ev;
    ev.set_container_id(c->id);
    ev.set_pid(resp.pid());
    env_.events.publish("/tasks/start", ev);
    return resp;
  }

  Process* p;
  {
    std::lock_guard lk(mu_);
    p = &find_process(*c, r.exec_id());
    if (p->status != ProcStatus::Created)
      throw Error(Code::FailedPrecondition, "exec \"" + r.exec_id() + "\" of container \"" + c->id + "\" was already started");
    if (c->init.status == ProcStatus::Stopped)
      throw Error(Code::FailedPrecondition, "container \"" + c->id + "\" has stopped; cannot start exec \"" + r.exec_id() + "\"");
  }
  auto spec_file = c->bundle / ("exec-" + r.exec_id() + ".json");
  auto pid_file = c->bundle / ("exec-" + r.exec_id() + ".pid");
  write_file_atomic(spec_file, p->spec.dump(), 0600);
  try {
    start_with_stdio(*c, *p, pid_file, [&](const std::string& console, const oci::Stdio& stdio) {
      oci::ExecOptions o{.process_json = spec_file, .pid_file = pid_file, .console_socket = console, .stdio = stdio};
      c->runtime->exec(c->id, o);
    });
  } catch (...) {
    std::filesystem::remove(spec_file);
    throw;
  }
  std::filesystem::remove(spec_file);
  std::filesystem::remove(pid_file);
  std::lock_guard lk(mu_);
  if (p->status == ProcStatus::Created) p->status = ProcStatus::Running;
  resp.set_pid(static_cast<uint32_t>(p->pid));
  events::TaskExecStarted ev;
  ev.set_container_id(c->id);
  ev.set_exec_id(r.exec_id());
  ev.set_pid(resp.pid());
  env_.events.publish("/tasks/exec-started", ev);
  return resp;
}

task::StateResponse TaskService::state(const task::StateRequest& r) {
  auto c = find(r.id());
  std::lock_guard lk(mu_);
  Process& p = find_process(*c, r.exec_id());
  task::StateResponse s;
  s.set_id(r.exec_id().empty() ? c->id : r.exec_id());
  s.set_exec_id(r.exec_id());
  s.set_bundle(c->bundle.string());
  s.set_pid(static_cast<uint32_t>(p.pid));
  s.set_status(to_proto(p.status));
  s.set_stdin(p.stdio.in);
  s.set_stdout(p.stdio.out);
  s.set_stderr(p.stdio.err);
  s.set_terminal(p.stdio.terminal);
  if (p.exit) {
    s.set_exit_status(p.exit->status);
    set_time(s.mutable_exited_at(), p.exit->at);
  }
  return s;
}

task::DeleteResponse TaskService::remove(const task::DeleteRequest& r) {
  auto c = find(r.id());
  task::DeleteResponse resp;
  if (!r.exec_id().empty()) {
    std::shared_ptr<Process> p;
    {
      std::lock_guard lk(mu_);
      auto it = c->execs.find(r.exec_id());
      if (it == c->execs.end())
        throw Error(Code::NotFound, "exec \"" + r.exec_id() + "\" of container \"" + c->id + "\" not found");
      if (it->second->status == ProcStatus::Running)
        throw Error(Code::FailedPrecondition, "exec \"" + r.exec_id() + "\" of container \"" + c->id + "\" is still running");
      p = std::move(it->second);
      c->execs.erase(it);
    }
    p->drain_output(kIoDrainTimeout);
    resp.set_pid(static_cast<uint32_t>(p->pid));
    if (p->exit) {
      resp.set_exit_status(p->exit->status);
      set_time(resp.mutable_exited_at(), p->exit->at);
    }
    return resp;
  }

  std::lock_guard op(c->op_mu);
  {
    std::lock_guard lk(mu_);
    if (c->init.status == ProcStatus::Running || c->init.status == ProcStatus::Paused)
      throw Error(Code::FailedPrecondition, "container \"" + c->id + "\" is still running; kill it first");
  }
  try {
    c->runtime->remove(c->id, true);
  } catch (const Error& e) {
    // Nothing to delete is fine (a restore that never ran, a runtime that already cleaned up).
    if (e.code() != Code::NotFound) env_.log.warn(e.what());
  }
  c->init.drain_output(kIoDrainTimeout);
  oom_->remove(c->id);
  if (c->rootfs_mounted) unmount_all(c->bundle / "rootfs");
  {
    std::lock_guard lk(mu_);
    if (!c->init.exit) {  // deleted before it ever ran
      c->init.exit = ExitInfo{128 + SIGKILL, std::chrono::system_clock::now()};
      c->init.status = ProcStatus::Stopped;
    }
    containers_.erase(c->id);
  }
  c->init.io.reset();
  c->init.console.reset();
  resp.set_pid(static_cast<uint32_t>(c->init.pid));
  resp.set_exit_status(c->init.exit->status);
  set_time(resp.mutable_exited_at(), c->init.exit->at);
  events::TaskDelete ev;
  ev.set_container_id(c->id);
  ev.set_pid(resp.pid());
  ev.set_exit_status(resp.exit_status());
  *ev.mutable_exited_at() = resp.exited_at();
  env_.events.publish("/tasks/delete", ev);
  return resp;
}

task::PidsResponse TaskService::pids(const task::PidsRequest& r) {
  auto c = find(r.id());
  auto list = c->runtime->ps(c->id);
  task::PidsResponse resp;
  std::lock_guard lk(mu_);
  for (int pid : list) {
    auto* pi = resp.add_processes();
    pi->set_pid(static_cast<uint32_t>(pid));
    for (const auto& [eid, p] : c->execs) {
      if (p->pid == pid) {
        containerd::runc::v1::ProcessDetails d;
        d.set_exec_id(eid);
        pi->mutable_info()->set_type_url("containerd.runc.v1.ProcessDetails");
        pi->mutable_info()->set_value(d.SerializeAsString());
      }
    }
  }
  return resp;
}

void TaskService::kill(const task::KillRequest& r) {
  auto c = find(r.id());
  int sig = static_cast<int>(r.signal());
  if (r.exec_id().empty()) {
    {
      std::lock_guard lk(mu_);
      if (c->init.status == ProcStatus::Stopped && !r.all())
        throw Error(Code::NotFound, "container \"" + c->id + "\": process already finished");
      if (c->init.status == ProcStatus::Created && c->init.pid == 0 && !c->restore_from.empty())
        throw Error(Code::FailedPrecondition, "container \"" + c->id + "\" is not running (restore pending)");
    }
    try {
      c->runtime->kill(c->id, sig, r.all());
    } catch (const Error& e) {
      std::lock_guard lk(mu_);
      if (c->init.status == ProcStatus::Stopped)
        throw Error(Code::NotFound, "container \"" + c->id + "\": process already finished");
      throw;
    }
    return;
  }
  pid_t pid;
  {
    std::lock_guard lk(mu_);
    Process& p = find_process(*c, r.exec_id());
    if (p.status == ProcStatus::Stopped || p.pid == 0)
      throw Error(Code::NotFound, "exec \"" + r.exec_id() + "\" of container \"" + c->id + "\": process already finished");
    pid = p.pid;
  }
  if (::kill(pid, sig) < 0) throw sys_error("kill exec \"" + r.exec_id() + "\" pid " + std::to_string(pid));
}

void TaskService::exec(const task::ExecProcessRequest& r) {
  auto c = find(r.id());
  validate_id("exec id", r.exec_id());
  auto spec = nlohmann::json::parse(r.spec().value(), nullptr, false);
  if (spec.is_discarded()) throw Error(Code::InvalidArgument, "exec \"" + r.exec_id() + "\": process spec is not JSON");
  oci::validate_process(spec, "exec \"" + r.exec_id() + "\" of container \"" + c->id + "\"");
  // The request decides whether the exec has a terminal, as in containerd's runc shim: a process
  // spec saying otherwise would make the runtime ask for a console socket we do not give (or the reverse).
  spec["terminal"] = r.terminal();
  auto p = std::make_shared<Process>();
  p->exec_id = r.exec_id();
  p->spec = std::move(spec);
  p->stdio = {r.stdin(), r.stdout(), r.stderr(), r.terminal()};
  if (!r.terminal()) p->io = std::make_unique<PipeIO>(p->stdio);
  {
    std::lock_guard lk(mu_);
    if (c->init.status == ProcStatus::Stopped) throw Error(Code::FailedPrecondition, "container \"" + c->id + "\" has stopped");
    if (c->execs.count(r.exec_id()))
      throw Error(Code::AlreadyExists, "exec \"" + r.exec_id() + "\" of container \"" + c->id + "\" already exists");
    c->execs[r.exec_id()] = std::move(p);
  }
  events::TaskExecAdded ev;
  ev.set_container_id(c->id);
  ev.set_exec_id(r.exec_id());
  env_.events.publish("/tasks/exec-added", ev);
}

task::WaitResponse TaskService::wait(const task::WaitRequest& r) {
  auto c = find(r.id());
  std::unique_lock lk(mu_);
  // Held by pointer: Delete may drop the exec from the container while we are still waking up.
  std::shared_ptr<Process> p(c, &c->init);
  if (!r.exec_id().empty()) {
    find_process(*c, r.exec_id());
    p = c->execs[r.exec_id()];
  }
  exit_cv_.wait(lk, [&] { return p->exit.has_value(); });
  task::WaitResponse resp;
  resp.set_exit_status(p->exit->status);
  set_time(resp.mutable_exited_at(), p->exit->at);
  return resp;
}

void TaskService::pause(const task::PauseRequest& r) {
  auto c = find(r.id());
  std::lock_guard op(c->op_mu);
  c->runtime->pause(c->id);
  {
    std::lock_guard lk(mu_);
    if (c->init.status == ProcStatus::Running) c->init.status = ProcStatus::Paused;
  }
  events::TaskPaused ev;
  ev.set_container_id(c->id);
  env_.events.publish("/tasks/paused", ev);
}

void TaskService::resume(const task::ResumeRequest& r) {
  auto c = find(r.id());
  std::lock_guard op(c->op_mu);
  c->runtime->resume(c->id);
  {
    std::lock_guard lk(mu_);
    if (c->init.status == ProcStatus::Paused) c->init.status = ProcStatus::Running;
  }
  events::TaskResumed ev;
  ev.set_container_id(c->id);
  env_.events.publish("/tasks/resumed", ev);
}

void TaskService::close_io(const task::CloseIORequest& r) {
  auto c = find(r.id());
  std::lock_guard lk(mu_);
  Process& p = find_process(*c, r.exec_id());
  if (!r.stdin()) return;
  if (p.io) p.io->close_stdin();
  if (p.console) p.console->close_stdin();
}

void TaskService::resize_pty(const task::ResizePtyRequest& r) {
  auto c = find(r.id());
  std::lock_guard lk(mu_);
  Process& p = find_process(*c, r.exec_id());
  // Without a terminal there is nothing to resize; containerd's runc shim answers OK too.
  if (p.console) p.console->resize(r.width(), r.height());
}

void TaskService::update(const task::UpdateTaskRequest& r) {
  auto c = find(r.id());
  auto res = nlohmann::json::parse(r.resources().value(), nullptr, false);
  if (res.is_discarded() || !res.is_object())
    throw Error(Code::InvalidArgument, "update of container \"" + c->id + "\": resources are not a JSON object");
  std::lock_guard op(c->op_mu);
  c->runtime->update(c->id, res);
}

void TaskService::checkpoint(const task::CheckpointTaskRequest& r) {
  auto c = find(r.id());
  oci::CheckpointFlags f = decode_checkpoint_options(r.has_options() ? &r.options() : nullptr, r.path(), c->id);
  std::lock_guard op(c->op_mu);
  bool paused;
  {
    std::lock_guard lk(mu_);
    if (c->init.status != ProcStatus::Running && c->init.status != ProcStatus::Paused)
      throw Error(Code::FailedPrecondition, "checkpoint of container \"" + c->id + "\": it is not running");
    paused = c->init.status == ProcStatus::Paused;
  }
  run_checkpoint(*c, f, paused, env_);
  events::TaskCheckpointed ev;
  ev.set_container_id(c->id);
  ev.set_checkpoint(f.image_path);
  env_.events.publish("/tasks/checkpointed", ev);
}

void TaskService::cuda_restore_after_start(Container& c) {
  restore_cuda_after_runtime_restore(c, env_);
}

task::StatsResponse TaskService::stats(const task::StatsRequest& r) {
  auto c = find(r.id());
  task::StatsResponse resp;
  *resp.mutable_stats() = metrics_from_runtime_stats(c->runtime->stats(c->id), host_uses_cgroup_v2());
  return resp;
}

task::ConnectResponse TaskService::connect(const task::ConnectRequest& r) {
  task::ConnectResponse resp;
  resp.set_shim_pid(static_cast<uint32_t>(::getpid()));
  resp.set_version(kVersion);
  std::lock_guard lk(mu_);
  auto it = containers_.find(r.id());
  if (it != containers_.end()) resp.set_task_pid(static_cast<uint32_t>(it->second->init.pid));
  return resp;
}

void TaskService::shutdown(const task::ShutdownRequest& r) {
  {
    std::lock_guard lk(mu_);
    if (!containers_.empty() && !r.now()) return;  // other containers of the pod still need us
  }
  env_.shutdown();
}

void TaskService::record_exit(Container& c, Process& p, int wait_status) {
  p.exit = ExitInfo{static_cast<uint32_t>(exit_code_from_status(wait_status)), std::chrono::system_clock::now()};
  p.status = ProcStatus::Stopped;
  if (p.is_init()) {
    // Without its own pid namespace the container's other processes outlive init: end them, as
    // containerd's runc shim does, so the task really is gone.
    if (!c.own_pid_ns) {
      std::thread([rt = c.runtime.get(), id = c.id] {
        try {
          rt->kill(id, SIGKILL, true);
        } catch (const std::exception&) {
        }
      }).detach();
    }
  }
  exit_cv_.notify_all();
  publish_exit(c, p);
}

void TaskService::publish_exit(const Container& c, const Process& p) {
  events::TaskExit ev;
  ev.set_container_id(c.id);
  ev.set_id(p.is_init() ? c.id : p.exec_id);
  ev.set_pid(static_cast<uint32_t>(p.pid));
  ev.set_exit_status(p.exit->status);
  set_time(ev.mutable_exited_at(), p.exit->at);
  env_.events.publish("/tasks/exit", ev);
}

void TaskService::on_exit(pid_t pid, int wait_status) {
  std::lock_guard lk(mu_);
  for (auto& [id, c] : containers_) {
    if (c->init.pid == pid && !c->init.exit) return record_exit(*c, c->init, wait_status);
    for (auto& [eid, p] : c->execs)
      if (p->pid == pid && !p->exit) return record_exit(*c, *p, wait_status);
  }
  // A container being created is not in containers_ yet, and a pid not read yet matches nothing.
  if (starting_ > 0) early_exits_[pid] = wait_status;
}

}  // namespace nvproxy::shim
