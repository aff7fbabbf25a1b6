// The container's init: created by the runtime's create (or restored at Start from a checkpoint),
// with its states (init_state.h), the runtime work behind them (InitOps), and its exit held back
// until the exits of the execs that still run are out, as in containerd's runc shim. Every
// operation on it waits for the one in flight (op_mu), so that a kill waits for a checkpoint.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "cgroup/paths.h"
#include "oci/runtime_flavor.h"
#include "shim/task/init_state.h"
#include "shim/task/process.h"
#include "shim/task/sandboxed_exit_wait.h"

namespace nvproxy::shim {

class ExecTable;

class InitProcess final : public Process, private InitOps {
 public:
  // `execs`: the container's, which outlives every call but wait() and exit().
  InitProcess(TaskContext& ctx, const ExecTable& execs);

  // Mounts the rootfs and runs the runtime's create (or records the restore for Start), then
  // publishes TaskCreate. Throws; what it did is undone when the container goes.
  void create();

  [[nodiscard]] ProcStatus status() const override;
  pid_t start() override;
  void kill(int signal, bool all) override;
  void resize(unsigned width, unsigned height) override;
  // The container's delete: runtime delete, IO drained, rootfs unmounted, TaskDelete.
  void remove() override;

  void pause();
  void resume();
  void update(const nlohmann::json& resources);
  void checkpoint(const oci::CheckpointFlags& flags);

  // Its cgroups, noted when its pid became known (they outlive it until the runtime's delete);
  // nullopt when it was gone by then or has not run yet.
  [[nodiscard]] std::optional<cgroup::CgroupPaths> cgroup() const;
  // ctx.mu held: refuses (throws) unless execs may be added and started now; `what` names the
  // request ("exec \"e1\" in it").
  void check_accepts_exec_locked(const std::string& what) const;
  // ctx.mu held: an exec's exit is out; the init's, if held for it, may follow.
  void exec_exited_locked();

 private:
  // A restore by annotation: the image fetched and checked into the bundle, the writable layer's
  // changes put back onto the mounted rootfs (restore_annotation.h). Throws with both undone.
  void fetch_for_restore();
  void exited_locked(ExitInfo e) override;
  // An OOM kill is what ends many inits: its event goes out with the exit, not after the delete.
  void before_exit() override;
  // ctx.mu held: the held exit goes out unless execs still run or the kill --all is in flight.
  void report_held_exit_locked();
  // ctx.mu held.
  void finish_exit_locked(ExitInfo e);
  void apply_locked(const InitState* from, const InitState& to);
  // An operation under op_mu: `op` runs it from the current state (the runtime call included),
  // the resulting state is applied, then `publish` runs with ctx.mu held.
  void drive(const std::function<const InitState&(const InitState&)>& op, const std::function<void()>& publish);
  // After a restore that failed: stopped with an exit event when nothing runs, running when the
  // runtime had restored processes (their exit comes through the reaper).
  void end_failed_restore();
  // Kills what is left of a container without its own pid namespace on a thread of its own, then
  // reports the held exit; false when the container is already going.
  bool kill_all_async();
  // A container of a runsc pod shares its sandbox's process, so the reaper never sees it end:
  // after a kill, its state is asked on a thread of its own (each call under the runtime's
  // deadline, for at most kSandboxedExitWait) until runsc says it stopped, and the exit is
  // reported as a death by the last signal sent.
  void watch_sandboxed_exit(int signal);
  // A runsc pod container: its end, however it comes, through runsc wait (sandboxed_exit_wait.h).
  void wait_in_sandbox();
  void stop_waiting_in_sandbox();
  void watch_oom();
  // Under runsc, before its create/restore: takes the runsc filestores a checkpoint's rootfs diff
  // brought along out of the container's own snapshot (shim/task/runsc_filestore.h).
  void remove_stale_runsc_filestores();
  // Before a restore: a replica of another container's image gets a cgroup named after itself
  // (oci/replica_cgroup.h). taken_from: the image's container; empty when unknown.
  void own_cgroup_of_replica(const std::string& taken_from);

  // InitOps
  [[nodiscard]] const std::string& container_id() const override;
  void run_start() override;
  void run_restore() override;
  void run_kill(int signal, bool all) override;
  void run_pause() override;
  void run_resume() override;
  void run_checkpoint(const oci::CheckpointFlags& flags, bool paused) override;
  void run_update(const nlohmann::json& resources) override;
  void run_delete() override;

  const ExecTable& execs_;
  // Guarded by ctx.mu.
  const InitState* state_ = &InitState::created();
  std::optional<ExitInfo> held_exit_;  // held until its running execs' exits are out
  bool killing_all_ = false;           // the kill --all after its exit is in flight
  bool watching_exit_ = false;         // watch_sandboxed_exit's thread runs
  int last_signal_ = 0;                // the last signal a kill sent (watch_sandboxed_exit)
  std::optional<cgroup::CgroupPaths> cgroup_;
  std::unique_ptr<SandboxedExitWait> exit_wait_;  // a runsc pod container's, from its start to its delete
};

}  // namespace nvproxy::shim
