// One container the shim serves: it owns its runtime, its rootfs mount, the init process (with
// its state, init_state.h) and its execs, and publishes their events. TaskService finds containers
// and translates RPCs; everything a container does to itself lives here.
//
// Locks: op_mu_ serialises the operations that drive the runtime for the whole container (start,
// kill, pause, resume, checkpoint, update, delete, exec start), as the init's lock does in
// containerd's runc shim: a kill waits for a checkpoint in flight. mu_ guards states, the exec
// table and exit ordering, and is never held across a runtime call, so the reaper is never blocked
// behind a long operation.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/log.h"
#include "common/process.h"
#include "oci/cgroup_paths.h"
#include "oci/runtime.h"
#include "proto/wkt.pb.h"
#include "shim/kit/event_sink.h"
#include "shim/task/config.h"
#include "shim/task/exec_state.h"
#include "shim/task/exit_book.h"
#include "shim/task/init_state.h"
#include "shim/task/oom_watch.h"
#include "shim/task/rootfs.h"
#include "shim/task/task_events.h"
#include "shim/task/task_options.h"

namespace nvproxy::shim {

class Container;

// The GPU side of checkpoint and restore, behind an interface so that the task layer runs in tests
// without a driver. `checkpoint` includes the runtime's own checkpoint (c.runtime()).
class CheckpointHooks {
 public:
  virtual ~CheckpointHooks() = default;
  virtual void checkpoint(Container& c, const oci::CheckpointFlags& flags, bool paused) = 0;
  // Before the runtime restores: refuse (throw) what this host cannot give back; nothing runs yet.
  virtual void before_restore(Container& c, const std::filesystem::path& image) = 0;
  virtual void after_restore(Container& c, const std::filesystem::path& image) = 0;
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

// What Create brings, already decoded.
struct ContainerSetup {
  std::string id;
  std::filesystem::path bundle;
  StdioPaths stdio;
  std::vector<MountSpec> rootfs;
  std::string checkpoint;  // image to restore at Start; empty: create
  TaskOptions options;
  ShimConfig config;
  bool own_pid_ns = true;
  bool gpu = false;
  std::vector<std::string> runtime_global;  // per-container runtime flags (runsc --nvproxy)
  // The init's pid is not this container's alone: a runsc container of a CRI pod reports its
  // pod's sandbox process.
  bool shares_sandbox_pid = false;
};

class Container final : public std::enable_shared_from_this<Container>, private InitOps {
 public:
  // Mounts the rootfs and runs the runtime's create (or records the restore for Start). Throws
  // with everything undone.
  static std::shared_ptr<Container> create(ContainerSetup setup, std::unique_ptr<oci::Runtime> runtime, ContainerEnv env);
  ~Container() override;

  [[nodiscard]] const std::string& id() const { return s_.id; }
  [[nodiscard]] const std::filesystem::path& bundle() const { return s_.bundle; }
  [[nodiscard]] const ShimConfig& config() const { return s_.config; }
  [[nodiscard]] bool gpu() const { return s_.gpu; }
  [[nodiscard]] oci::Runtime& runtime() { return *runtime_; }
  [[nodiscard]] pid_t init_pid() const { return init_->pid(); }
  // The init's cgroups, noted when its pid became known (they outlive it until the runtime's
  // delete); nullopt when it was gone by then or has not run yet.
  [[nodiscard]] std::optional<oci::CgroupPaths> init_cgroup() const;
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
  class ExecRunner;
  Container(ContainerSetup setup, std::unique_ptr<oci::Runtime> runtime, ContainerEnv env);

  // InitOps
  [[nodiscard]] const std::string& container_id() const override { return s_.id; }
  void run_start() override;
  void run_restore() override;
  void run_kill(int signal, bool all) override;
  void run_pause() override;
  void run_resume() override;
  void run_checkpoint(const oci::CheckpointFlags& flags, bool paused) override;
  void run_update(const nlohmann::json& resources) override;
  void run_delete() override;

  // Runs `runtime_call` with the process's IO (console socket when it has a terminal), reads the
  // pid file and claims the pid in the exit book (an exit that came first is recorded at once).
  void launch(const std::shared_ptr<Process>& p, const std::filesystem::path& pid_file,
              const std::function<void(const std::string& console_socket, const oci::Stdio& stdio)>& runtime_call);
  void on_exit(const std::shared_ptr<Process>& p, int wait_status);
  // After a start: clears `starting`, publishes via `publish_start` (mu_ held), then records an
  // exit that came meanwhile.
  void finish_start(const std::shared_ptr<Process>& p, const std::function<void()>& publish_start);
  // After a restore that failed: stopped with an exit event when nothing runs, running when the
  // runtime had restored processes (their exit comes through the reaper).
  void end_failed_restore();
  void kill_all_async();
  std::shared_ptr<ExecProcess> find_exec_locked(const std::string& exec_id) const;
  // mu_ held.
  void finish_init_exit_locked(ExitInfo e);
  void publish_exit_locked(const Process& p);
  void apply_init_locked(const InitState* from, const InitState& to);
  // An init operation under op_mu_: `op` runs it from the current state (the runtime call
  // included), the resulting state is applied, then `publish` runs with mu_ held.
  void drive_init(const std::function<const InitState&(const InitState&)>& op, const std::function<void()>& publish);
  [[nodiscard]] size_t running_execs_locked() const;
  void watch_oom();
  // Under runsc, before its create/restore: takes the runsc filestores a checkpoint's rootfs diff
  // brought along out of the container's own snapshot (shim/task/runsc_filestore.h).
  void remove_stale_runsc_filestores();

  ContainerSetup s_;
  std::unique_ptr<oci::Runtime> runtime_;
  ContainerEnv env_;
  TaskEvents events_;
  std::optional<RootfsMount> rootfs_;
  std::shared_ptr<Process> init_;
  std::mutex op_mu_;
  mutable std::mutex mu_;
  const InitState* state_ = &InitState::created();
  std::map<std::string, std::shared_ptr<ExecProcess>> execs_;
  std::optional<ExitInfo> held_init_exit_;  // the init's exit, held until its running execs' exits are out
  // Guarded by mu_.
  std::optional<oci::CgroupPaths> init_cgroup_;
};

}  // namespace nvproxy::shim
