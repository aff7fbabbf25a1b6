// One container the shim serves: it owns its runtime, its rootfs mount, the init process
// (init_process.h) and its execs (exec_process.h), and finds the process an RPC names. What each
// process does, and the events it publishes (task_events.h), is its own; TaskService finds
// containers and translates RPCs.
//
// Locks (in TaskContext, task_context.h, shared by the container and its processes): op_mu
// serialises the operations that drive the runtime for the whole container (the init's start,
// kill, pause, resume, checkpoint, update and delete, and an exec's start), as the init's lock does
// in containerd's runc shim: a kill waits for a checkpoint in flight. mu guards states, the exec
// table and exit ordering, and is never held across a runtime call, so the reaper is never blocked
// behind a long operation.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cgroup/paths.h"
#include "common/log.h"
#include "common/process.h"
#include "oci/runtime.h"
#include "shim/kit/event_sink.h"
#include "shim/task/config.h"
#include "shim/task/exec_table.h"
#include "shim/task/exit_book.h"
#include "shim/task/oom_watch.h"
#include "shim/task/process.h"
#include "shim/task/rootfs.h"
#include "shim/task/task_options.h"

namespace nvproxy::shim {

class Container;
class InitProcess;
struct TaskContext;

// The GPU side of checkpoint and restore, behind an interface so that the task layer runs in tests
// without a driver. `checkpoint` includes the runtime's own checkpoint (c.runtime()) and, with
// checkpoint.image_store, the store's entry it writes into.
class CheckpointHooks {
 public:
  virtual ~CheckpointHooks() = default;
  virtual void checkpoint(Container& c, const oci::CheckpointFlags& flags, bool paused) = 0;
  // The runtime's restore as the task layer runs it: the task's process started from `image`
  // (stdio, pid, OOM watch); leave_stopped: CRIU leaves the processes stopped; taken_from: the
  // container the image was taken from (empty: unknown).
  using RuntimeRestore =
      std::function<void(const std::filesystem::path& image, bool leave_stopped, const std::string& taken_from)>;
  // The whole restore from what containerd handed over (an image, or the store's reference):
  // refuses what this host cannot give back before anything runs, calls run_restore, brings
  // CUDA back. Throws; a failure after run_restore has removed the restored container.
  virtual void restore(Container& c, const std::filesystem::path& checkpoint, const RuntimeRestore& run_restore) = 0;
  // Restore by annotation (restore_annotation.h), at Create: the checkpoint image `reference`
  // pulled and unpacked into `into`, checked against the new container's spec, this host's GPUs
  // and runtime, and its memory pulled into the image store, all before anything runs; Start's
  // restore then finds it there. Returns the unpacked archive (checkpoint/, rootfs-diff.tar, ...).
  // Throws with the reason; `into` is the caller's to remove.
  virtual std::filesystem::path fetch_for_restore(Container& c, const std::string& reference,
                                                  const std::filesystem::path& into) = 0;
  // A CRI pod created under runc or crun whose annotations name `reference`: refused (Error
  // FailedPrecondition starting with `who`) when it is a gVisor pod's image, which restores under
  // runsc only; `into` is scratch space, removed before the return. Nothing else is checked here:
  // each container's create checks its own image.
  virtual void refuse_pod_image_under_runc(const std::string& /*who*/, const std::string& /*reference*/,
                                           const std::filesystem::path& /*into*/, const ShimConfig& /*cfg*/) {}
  // Whether the gVisor pod `sandbox` is being restored whole and does not run yet (its sandbox
  // waits for its last container): nothing may ask the sandbox meanwhile.
  [[nodiscard]] virtual bool pod_restoring(const std::string& /*sandbox*/) const { return false; }
  // The pod's restore is over without its last container (abandoned, or its sandbox deleted):
  // what waited for it is dropped.
  virtual void pod_restore_over(const std::string& /*sandbox*/) {}
};

// What a container needs from the shim around it.
struct ContainerEnv {
  std::string ns;
  Logger& log;
  ProcessRunner& runner;
  EventSink& events;
  ExitBook& exits;
  CheckpointHooks& checkpoints;
  OomWatch* oom = nullptr;  // none under runsc or in tests
};

// A container of a gVisor pod restored whole (pod_restore_annotation.h).
struct PodRestoreSetup {
  std::string sandbox;             // the pod's sandbox id
  std::string name;                // its name in the pod; "" for the sandbox container itself
  std::vector<std::string> names;  // every container the pod restores (the sandbox container not among them)
};

// What Create brings, already decoded.
struct ContainerSetup {
  std::string id;
  std::filesystem::path bundle;
  StdioPaths stdio;
  std::vector<MountSpec> rootfs;
  std::string checkpoint;  // image to restore at Start; empty: create
  // Restore by annotation: the checkpoint image fetched at Create into RESTORE_DIR, whose
  // checkpoint/ is `checkpoint` (restore_annotation.h). Empty: none.
  std::string restore_reference;
  TaskOptions options;
  ShimConfig config;
  bool own_pid_ns = true;
  bool gpu = false;
  std::vector<std::string> runtime_global;  // per-container runtime flags (runsc --nvproxy)
  // The init's pid is not this container's alone: a runsc container of a CRI pod reports its
  // pod's sandbox process.
  bool shares_sandbox_pid = false;
  // Restored with its whole gVisor pod from `restore_reference`; none: a container of its own.
  std::optional<PodRestoreSetup> pod_restore;
};

class Container final {
 public:
  // Mounts the rootfs and runs the runtime's create (or records the restore for Start). Throws
  // with everything undone.
  static std::shared_ptr<Container> create(ContainerSetup setup, std::unique_ptr<oci::Runtime> runtime, ContainerEnv env);
  ~Container();
  Container(const Container&) = delete;
  Container& operator=(const Container&) = delete;

  [[nodiscard]] const std::string& id() const;
  [[nodiscard]] const std::filesystem::path& bundle() const;
  [[nodiscard]] const ShimConfig& config() const;
  [[nodiscard]] bool gpu() const;
  [[nodiscard]] oci::Runtime& runtime();
  [[nodiscard]] const ContainerSetup& setup() const;
  // This container, held (null once it is being destroyed).
  [[nodiscard]] std::shared_ptr<Container> held() const;
  [[nodiscard]] pid_t init_pid() const;
  // The init's cgroups, noted when its pid became known (they outlive it until the runtime's
  // delete); nullopt when it was gone by then or has not run yet.
  [[nodiscard]] std::optional<cgroup::CgroupPaths> init_cgroup() const;
  // The status of the init ("") or an exec; NotFound for an unknown exec.
  [[nodiscard]] ProcStatus status(const std::string& exec_id) const;

  // The process for an exec id ("" = init); NotFound otherwise.
  std::shared_ptr<Process> process(const std::string& exec_id) const;
  // exec id -> pid of execs that have one.
  std::map<std::string, pid_t> exec_pids() const;

  pid_t start(const std::string& exec_id);
  void kill(const std::string& exec_id, int signal, bool all);
  void pause();
  void resume();
  void update(const nlohmann::json& resources);
  void checkpoint(const oci::CheckpointFlags& flags);
  void add_exec(const std::string& exec_id, nlohmann::json spec, StdioPaths stdio);
  void resize(const std::string& exec_id, unsigned width, unsigned height);
  // Deletes an exec (which must not run) or, for "", the container: runtime delete, IO drained,
  // rootfs unmounted. Returns the process with its exit.
  std::shared_ptr<Process> remove(const std::string& exec_id);

 private:
  Container(ContainerSetup setup, std::unique_ptr<oci::Runtime> runtime, ContainerEnv env);

  // Declared first: the processes refer to it, so it goes last.
  std::unique_ptr<TaskContext> ctx_;
  ExecTable execs_;  // guarded by ctx_->mu
  std::shared_ptr<InitProcess> init_;
};

}  // namespace nvproxy::shim
