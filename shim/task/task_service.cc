#include "shim/task/task_service.h"

#include <signal.h>
#include <unistd.h>

#include "checkpoint/image/kube_archive.h"
#include "common/error.h"
#include "common/validate.h"
#include "oci/cgroup_metrics.h"
#include "oci/shadowed_mounts.h"
#include "oci/spec.h"
#include "proto/runc_options.pb.h"
#include "shim/kit/timestamp.h"
#include "shim/kit/version.h"
#include "shim/task/gpu_setup.h"
#include "shim/task/restore_annotation.h"
#include "shim/task/runsc_pod_shm.h"
#include "shim/task/runsc_root.h"
#include "shim/task/runtime_locator.h"
#include "shim/task/task_options.h"

namespace nvproxy::shim {

namespace task = containerd::task::v2;
using containerd::v1::types::Status;

namespace {

Status to_proto(ProcStatus s) {
  switch (s) {
    case ProcStatus::Created: return containerd::v1::types::CREATED;
    case ProcStatus::Running: return containerd::v1::types::RUNNING;
    case ProcStatus::Paused: return containerd::v1::types::PAUSED;
    case ProcStatus::Stopped: return containerd::v1::types::STOPPED;
    case ProcStatus::Deleted: return containerd::v1::types::STOPPED;
  }
  return containerd::v1::types::UNKNOWN;
}

// Holds an id while its Create runs, so a second Create of it fails at once.
class Reservation {
 public:
  Reservation(std::mutex& mu, std::map<std::string, bool>& table, const std::map<std::string, std::shared_ptr<Container>>& live,
              const std::string& id)
      : mu_(mu), table_(table), id_(id) {
    std::lock_guard lk(mu_);
    if (live.count(id) || !table_.emplace(id, true).second)
      throw Error(Code::AlreadyExists, "container \"" + id + "\" already exists in this shim");
  }
  ~Reservation() {
    std::lock_guard lk(mu_);
    table_.erase(id_);
  }
  Reservation(const Reservation&) = delete;
  Reservation& operator=(const Reservation&) = delete;

 private:
  std::mutex& mu_;
  std::map<std::string, bool>& table_;
  std::string id_;
};

}  // namespace

TaskService::TaskService(ServiceDeps deps) : deps_(std::move(deps)) {}

std::shared_ptr<Container> TaskService::find(const std::string& id) {
  std::lock_guard lk(mu_);
  auto it = containers_.find(id);
  if (it == containers_.end()) throw Error(Code::NotFound, "container \"" + id + "\" not found in this shim");
  return it->second;
}

namespace {

// runsc restores a checkpoint only as a whole sandbox: its root container first, the others into
// that sandbox while it is being restored. A container of a pod that CRI restores into the pod's
// running sandbox would fail inside runsc with "sandbox is not being restored": refused before.
void refuse_runsc_container_restore(const oci::Spec& spec, const std::string& id) {
  auto type = spec.annotation("io.kubernetes.cri.container-type");
  if (!type || *type != "container") return;
  std::string sandbox = spec.annotation("io.kubernetes.cri.sandbox-id").value_or("");
  throw Error(Code::FailedPrecondition,
              "restore of container \"" + id + "\" into the running pod sandbox \"" + sandbox +
                  "\" is not possible under runsc: runsc restores a checkpoint only as a whole sandbox (the pod's sandbox "
                  "container first, then its containers), never one container into a running sandbox; restore it under "
                  "runc, or checkpoint and restore a container that is its own sandbox (ctr)");
}

// runsc refuses to restore a checkpoint whose spec has two mounts at one destination (a user's
// /dev/shm beside containerd's own), and says so only at the restore. The earlier one is hidden
// from the container anyway, so it goes, before the sandbox starts, and the log says which.
void drop_mounts_runsc_cannot_restore(const std::string& id, const std::filesystem::path& bundle, oci::Spec& spec, Logger& log) {
  auto dropped = oci::drop_shadowed_mounts(spec.json());
  if (dropped.empty()) return;
  for (const auto& d : dropped)
    log.info("container \"" + id + "\": runsc: dropped " + d +
             " (the container sees the later one; runsc cannot restore two mounts at one destination)");
  spec.save(bundle);
}

// A CRI pod's /dev/shm as a tmpfs inside its gVisor sandbox (runsc_pod_shm.h), so that the pod's
// checkpoint holds it.
void keep_pod_shm_in_sandbox(const std::string& id, const std::filesystem::path& bundle, oci::Spec& spec, Logger& log) {
  auto done = share_pod_shm_in_sandbox(spec.json());
  if (!done) return;
  spec.save(bundle);
  log.info("container \"" + id + "\": runsc: " + *done);
}

// A restore asked for by annotation (restore_annotation.h) becomes the create's checkpoint: the
// image is fetched into the bundle when the container is created (InitProcess::create).
void take_restore_annotation(const oci::Spec& spec, bool runsc, ContainerSetup& s, Logger& log) {
  auto a = restore_annotation(spec, s.id, s.config.checkpoint);
  if (!a) return;
  if (runsc)
    throw Error(Code::FailedPrecondition,
                "create of container \"" + s.id + "\": restore by annotation (" + kRestoreAnnotationPrefix + a->name +
                    ") is not possible under runsc for one container: gVisor restores a whole sandbox from its own state "
                    "file, so a runsc pod is restored whole, from a pod's image that the annotations of every container "
                    "of the pod name (docs/install.md), or the container under runc or crun");
  s.restore_reference = a->reference;
  s.checkpoint = (checkpoint::kube_archive_in(s.bundle / kRestoreDir) / "checkpoint").string();
  log.info("create of container \"" + s.id + "\" (" + a->name + "): restored from " + a->reference + ", as its annotation asks");
}

}  // namespace

task::CreateTaskResponse TaskService::create(const task::CreateTaskRequest& r) {
  validate_id("container id", r.id());
  std::filesystem::path bundle = r.bundle();
  if (!bundle.is_absolute()) throw Error(Code::InvalidArgument, "bundle path \"" + r.bundle() + "\" is not absolute");
  Reservation reserved(mu_, reserved_, containers_, r.id());

  ContainerSetup s;
  s.id = r.id();
  s.bundle = bundle;
  s.stdio = {r.stdin(), r.stdout(), r.stderr(), r.terminal()};
  for (const auto& m : r.rootfs())
    s.rootfs.push_back({m.type(), m.source(), m.target(), {m.options().begin(), m.options().end()}});
  if (r.has_options()) s.options = decode_task_options(r.options(), "create of container \"" + r.id() + "\"");
  // containerd turns a runc-typed criu_image_path into `checkpoint` only for runc runtime names.
  s.checkpoint = r.checkpoint().empty() ? s.options.criu_image_path : r.checkpoint();
  s.config = deps_.load_config(s.options.config_path);
  apply_task_options(s.options, s.config.runtime);
  s.config.runtime = runtime_for_namespace(s.config.runtime, deps_.ns);
  deps_.log.set_level(s.config.log_level);

  oci::Spec spec = oci::Spec::load(bundle);
  bool runsc = oci::runtime_kind_from_binary(s.config.runtime.binary) == oci::RuntimeKind::Runsc;
  if (runsc) {
    std::string sandbox = runsc_sandbox_of(spec, s.id);
    validate_id("sandbox id", sandbox);
    s.config.runtime = runsc_root_for_sandbox(s.config.runtime, deps_.ns, sandbox);
  }
  if (s.checkpoint.empty() && runsc) take_pod_restore(spec, s);
  if (!runsc && is_cri_sandbox(spec)) refuse_pod_images_under_runc(spec, s);
  if (s.checkpoint.empty()) take_restore_annotation(spec, runsc, s, deps_.log);
  if (!s.checkpoint.empty() && runsc && !s.pod_restore) refuse_runsc_container_restore(spec, s.id);
  s.own_pid_ns = spec.own_pid_namespace();
  s.shares_sandbox_pid = runsc && spec.annotation("io.kubernetes.cri.container-type").value_or("") == "container";
  if (runsc) {
    drop_mounts_runsc_cannot_restore(s.id, bundle, spec, deps_.log);
    keep_pod_shm_in_sandbox(s.id, bundle, spec, deps_.log);
  }
  GpuSetup g = prepare_gpu(s.id, bundle, s.config, spec, deps_.self_binary, deps_.log);
  s.gpu = g.gpu;
  s.runtime_global = std::move(g.runtime_global);
  if (runsc && s.gpu) warn_pod_sandbox_without_nvproxy(spec, s);

  auto runtime = deps_.make_runtime(s.config.runtime, bundle / "log.json");
  write_runtime_record(bundle, s.config.runtime);
  std::string binary = s.config.runtime.binary;
  OomWatch* oom = runtime->kind() == oci::RuntimeKind::Runsc ? nullptr : deps_.oom;  // runsc's processes live in the sandbox
  std::optional<PodRestoreSetup> pod = s.pod_restore;
  std::shared_ptr<Container> c;
  try {
    c = Container::create(std::move(s), std::move(runtime),
                          ContainerEnv{deps_.ns, deps_.log, deps_.runner, deps_.events, exits_, deps_.checkpoints, oom});
  } catch (const std::exception& e) {
    if (pod && !pod->name.empty()) abandon_pod_restore(pod->sandbox, e.what());
    if (pod && pod->name.empty()) {
      std::lock_guard lk(mu_);
      pod_restores_.erase(pod->sandbox);
    }
    throw;
  }
  {
    std::lock_guard lk(mu_);
    containers_.emplace(c->id(), c);
  }
  deps_.log.info("created container \"" + c->id() + "\" pid " + std::to_string(c->init_pid()) + " with " + binary +
                 (c->gpu() ? " (GPU)" : ""));
  task::CreateTaskResponse resp;
  resp.set_pid(static_cast<uint32_t>(c->init_pid()));
  return resp;
}

task::StartResponse TaskService::start(const task::StartRequest& r) {
  auto c = find(r.id());
  task::StartResponse resp;
  try {
    resp.set_pid(static_cast<uint32_t>(c->start(r.exec_id())));
  } catch (const std::exception& e) {
    if (r.exec_id().empty()) end_failed_pod_restore(*c, e.what());
    throw;
  }
  return resp;
}

task::StateResponse TaskService::state(const task::StateRequest& r) {
  auto c = find(r.id());
  auto p = c->process(r.exec_id());
  task::StateResponse s;
  s.set_id(r.exec_id().empty() ? c->id() : r.exec_id());
  s.set_exec_id(r.exec_id());
  s.set_bundle(c->bundle().string());
  s.set_pid(static_cast<uint32_t>(p->pid()));
  s.set_status(to_proto(c->status(r.exec_id())));
  s.set_stdin(p->stdio().in);
  s.set_stdout(p->stdio().out);
  s.set_stderr(p->stdio().err);
  s.set_terminal(p->stdio().terminal);
  if (auto e = p->exit()) {
    s.set_exit_status(e->status);
    set_time(s.mutable_exited_at(), e->at);
  }
  return s;
}

task::DeleteResponse TaskService::remove(const task::DeleteRequest& r) {
  auto c = find(r.id());
  auto p = c->remove(r.exec_id());
  if (r.exec_id().empty()) {
    std::lock_guard lk(mu_);
    containers_.erase(c->id());
    pod_restores_.erase(c->id());  // a pod's sandbox container: its restore is over
  }
  if (r.exec_id().empty() && c->setup().pod_restore && c->setup().pod_restore->name.empty())
    deps_.checkpoints.pod_restore_over(c->setup().pod_restore->sandbox);
  task::DeleteResponse resp;
  resp.set_pid(static_cast<uint32_t>(p->pid()));
  if (auto e = p->exit()) {
    resp.set_exit_status(e->status);
    set_time(resp.mutable_exited_at(), e->at);
  }
  return resp;
}

task::PidsResponse TaskService::pids(const task::PidsRequest& r) {
  auto c = find(r.id());
  auto list = c->runtime().ps(c->id());
  auto execs = c->exec_pids();
  task::PidsResponse resp;
  for (int pid : list) {
    auto* pi = resp.add_processes();
    pi->set_pid(static_cast<uint32_t>(pid));
    for (const auto& [eid, epid] : execs) {
      if (epid != pid) continue;
      containerd::runc::v1::ProcessDetails d;
      d.set_exec_id(eid);
      pi->mutable_info()->set_type_url("containerd.runc.v1.ProcessDetails");
      pi->mutable_info()->set_value(d.SerializeAsString());
    }
  }
  return resp;
}

void TaskService::kill(const task::KillRequest& r) {
  find(r.id())->kill(r.exec_id(), static_cast<int>(r.signal()), r.all());
}

void TaskService::exec(const task::ExecProcessRequest& r) {
  auto c = find(r.id());
  validate_id("exec id", r.exec_id());
  auto spec = nlohmann::json::parse(r.spec().value(), nullptr, false);
  if (spec.is_discarded()) throw Error(Code::InvalidArgument, "exec \"" + r.exec_id() + "\": process spec is not JSON");
  oci::validate_process(spec, "exec \"" + r.exec_id() + "\" of container \"" + c->id() + "\"");
  // The request decides whether the exec has a terminal, as in containerd's runc shim: a process
  // spec saying otherwise would make the runtime ask for a console socket we do not give (or the reverse).
  spec["terminal"] = r.terminal();
  c->add_exec(r.exec_id(), std::move(spec), {r.stdin(), r.stdout(), r.stderr(), r.terminal()});
}

task::WaitResponse TaskService::wait(const task::WaitRequest& r) {
  // Holds the process: Delete may drop it from the container while we are still waking up.
  auto p = find(r.id())->process(r.exec_id());
  ExitInfo e = p->wait();
  task::WaitResponse resp;
  resp.set_exit_status(e.status);
  set_time(resp.mutable_exited_at(), e.at);
  return resp;
}

void TaskService::pause(const task::PauseRequest& r) {
  find(r.id())->pause();
}
void TaskService::resume(const task::ResumeRequest& r) {
  find(r.id())->resume();
}

void TaskService::close_io(const task::CloseIORequest& r) {
  auto p = find(r.id())->process(r.exec_id());
  if (r.stdin()) p->close_stdin();
}

void TaskService::resize_pty(const task::ResizePtyRequest& r) {
  find(r.id())->resize(r.exec_id(), r.width(), r.height());
}

void TaskService::update(const task::UpdateTaskRequest& r) {
  auto c = find(r.id());
  auto res = nlohmann::json::parse(r.resources().value(), nullptr, false);
  if (res.is_discarded() || !res.is_object())
    throw Error(Code::InvalidArgument, "update of container \"" + c->id() + "\": resources are not a JSON object");
  c->update(res);
}

void TaskService::checkpoint(const task::CheckpointTaskRequest& r) {
  auto c = find(r.id());
  const wkt::Any* options = r.has_options() ? &r.options() : nullptr;
  auto flags = decode_checkpoint_options(options, r.path(), c->id(), c->config().checkpoint.exit_without_options);
  deps_.log.info("checkpoint of container \"" + c->id() + "\" requested with " + describe_checkpoint_request(options, flags) +
                 " (image " + flags.image_path + ")");
  c->checkpoint(flags);
}

task::StatsResponse TaskService::stats(const task::StatsRequest& r) {
  auto c = find(r.id());
  task::StatsResponse resp;
  // runsc's processes live in its sandbox's cgroup: the runtime reports for the container. A
  // sandbox that is being restored is not asked: twice in some 30 e2e runs a sandbox died in its
  // last container's restore while containerd's stats polling asked it.
  if (const auto& pod = c->setup().pod_restore; pod && deps_.checkpoints.pod_restoring(pod->sandbox))
    throw Error(Code::Unavailable, "container \"" + c->id() + "\": its pod's sandbox is being restored; no stats until it runs");
  if (c->runtime().kind() == oci::RuntimeKind::Runsc) {
    *resp.mutable_stats() = oci::metrics_from_runtime_stats(c->runtime().stats(c->id()), oci::host_uses_cgroup_v2());
    return resp;
  }
  // As containerd's runc shim: the cgroup the init was in, read directly, so a stopped task
  // (its cgroup stays until Delete) answers too.
  auto cg = c->init_cgroup();
  if (!cg) throw Error(Code::NotFound, "container \"" + c->id() + "\": cgroup does not exist");
  *resp.mutable_stats() = oci::metrics_from_cgroup(*cg, oci::host_uses_cgroup_v2());
  return resp;
}

task::ConnectResponse TaskService::connect(const task::ConnectRequest& r) {
  task::ConnectResponse resp;
  resp.set_shim_pid(static_cast<uint32_t>(::getpid()));
  resp.set_version(kVersion);
  std::lock_guard lk(mu_);
  auto it = containers_.find(r.id());
  if (it != containers_.end()) resp.set_task_pid(static_cast<uint32_t>(it->second->init_pid()));
  return resp;
}

void TaskService::shutdown(const task::ShutdownRequest& r) {
  {
    std::lock_guard lk(mu_);
    if ((!containers_.empty() || !reserved_.empty()) && !r.now()) return;  // other containers of the pod still need us
  }
  deps_.shutdown();
}

}  // namespace nvproxy::shim
