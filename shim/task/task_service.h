// The shim v2 Task service: finds the container an RPC names, hands the request to it, and turns
// answers into protobuf. It owns the container table and the exit book (which process an exit
// belongs to); the lifecycle itself lives in Container. RPC decoding lives in task_rpc.cc.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "common/log.h"
#include "common/process.h"
#include "oci/runtime.h"
#include "oci/spec.h"
#include "proto/shim_task.pb.h"
#include "shim/kit/event_sink.h"
#include "shim/task/config.h"
#include "shim/task/container.h"
#include "shim/task/exit_book.h"
#include "shim/task/pod_restore_annotation.h"

namespace nvproxy::shim {

// What the service is built from; tests replace the runtime, the config, the GPU side and the OOM
// watch with stand-ins.
struct ServiceDeps {
  std::string ns;           // containerd namespace
  std::string self_binary;  // our own executable (for OCI hooks)
  Logger& log;
  ProcessRunner& runner;
  EventSink& events;
  CheckpointHooks& checkpoints;
  OomWatch* oom = nullptr;
  std::function<std::unique_ptr<oci::Runtime>(const oci::RuntimeConfig&, const std::filesystem::path& log_file)> make_runtime;
  std::function<ShimConfig(const std::string& explicit_path)> load_config;
  std::function<void()> shutdown;  // ends the daemon (Shutdown once no container is left)
};

class TaskService {
 public:
  explicit TaskService(ServiceDeps deps);

  containerd::task::v2::CreateTaskResponse create(const containerd::task::v2::CreateTaskRequest& r);
  containerd::task::v2::StartResponse start(const containerd::task::v2::StartRequest& r);
  containerd::task::v2::StateResponse state(const containerd::task::v2::StateRequest& r);
  containerd::task::v2::DeleteResponse remove(const containerd::task::v2::DeleteRequest& r);
  containerd::task::v2::PidsResponse pids(const containerd::task::v2::PidsRequest& r);
  void kill(const containerd::task::v2::KillRequest& r);
  void exec(const containerd::task::v2::ExecProcessRequest& r);
  containerd::task::v2::WaitResponse wait(const containerd::task::v2::WaitRequest& r);
  void pause(const containerd::task::v2::PauseRequest& r);
  void resume(const containerd::task::v2::ResumeRequest& r);
  void close_io(const containerd::task::v2::CloseIORequest& r);
  void resize_pty(const containerd::task::v2::ResizePtyRequest& r);
  void update(const containerd::task::v2::UpdateTaskRequest& r);
  void checkpoint(const containerd::task::v2::CheckpointTaskRequest& r);
  containerd::task::v2::StatsResponse stats(const containerd::task::v2::StatsRequest& r);
  containerd::task::v2::ConnectResponse connect(const containerd::task::v2::ConnectRequest& r);
  void shutdown(const containerd::task::v2::ShutdownRequest& r);

  // The container an RPC names; NotFound otherwise.
  std::shared_ptr<Container> container(const std::string& id) { return find(id); }

  // Called by the reaper for every child that is not one of our own commands.
  void on_exit(pid_t pid, int wait_status) { exits_.on_exit(pid, wait_status); }

 private:
  std::shared_ptr<Container> find(const std::string& id);
  // A gVisor pod restored whole (pod_restore_annotation.h): its sandbox container's create takes
  // the pod's annotations and notes the pod; each container of it created afterwards is restored
  // from the same image, one the image does not hold refused (and the pod's sandbox ended).
  void take_pod_restore(const oci::Spec& spec, ContainerSetup& s);
  // A CRI pod under runc or crun whose annotations name a gVisor pod's image: refused at its
  // sandbox's create, before any of its containers is created.
  void refuse_pod_images_under_runc(const oci::Spec& spec, const ContainerSetup& s);
  // The pod's restore cannot finish: its sandbox (runsc's root container, waiting for the rest)
  // is killed so that nothing half-restored stays, and the pod forgotten.
  // Waits (boundedly) until every container of the pod this shim serves is reported ended.
  void abandon_pod_restore(const std::string& sandbox, const std::string& why);
  // The pod's sandbox killed: through runsc, and its process where runsc cannot signal it.
  void end_pod_sandbox(Container& root);
  // A container of a pod restored whole whose Start (its restore) failed: the pod's restore is
  // abandoned, so that CRI can stop and remove the pod.
  void end_failed_pod_restore(Container& c, const std::string& why);
  // A GPU container of a runsc pod whose sandbox booted without nvproxy (gpu.nvproxy: auto) cannot
  // reach its GPU: said in the log, with what to do.
  void warn_pod_sandbox_without_nvproxy(const oci::Spec& spec, const ContainerSetup& s);

  ServiceDeps deps_;
  ExitBook exits_;
  std::mutex mu_;  // guards containers_ and reserved_
  std::map<std::string, std::shared_ptr<Container>> containers_;
  std::map<std::string, bool> reserved_;               // ids whose Create is in flight
  std::map<std::string, PodRestoreAsk> pod_restores_;  // sandbox id -> the pod's restore (guarded by mu_)
};

}  // namespace nvproxy::shim
