// The checkpoint of a container with GPU processes:
//
//   list pids -> scan device holders -> classify (CUDA state of each holder) -> preflight (refuse
//   processes the driver cannot restore) -> lock all -> checkpoint all (parallel) -> verify (rescan:
//   no holder may remain) -> snapshot (the runtime's checkpoint) -> resume if the task keeps running.
//
// Any failure before the snapshot has completed restores and unlocks every toggled process and
// throws Error(FailedPrecondition) carrying the diagnostic table; the diagnostic is also written as
// JSON (checkpoint-diagnostic.json in the bundle). The container keeps running. A checkpoint that
// succeeded writes the same report with verdict "done" and its phases. A process that
// cannot be brought back is reported as stuck, never claimed as rolled back.
//
// Everything it touches is injected (OrchestratorTools, and the snapshot callback), so it runs in
// tests against fakes.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "checkpoint/attempt/release.h"
#include "checkpoint/config.h"
#include "checkpoint/preflight/snapshot_check.h"
#include "checkpoint/preflight/space_check.h"
#include "checkpoint/process/container_hold.h"
#include "checkpoint/process/file_identity.h"
#include "checkpoint/process/process_holds.h"
#include "checkpoint/process/process_list.h"
#include "checkpoint/report/diagnostic.h"
#include "checkpoint/shared/comm_probe.h"
#include "checkpoint/shared/cuda_toggler.h"
#include "checkpoint/shared/gpu_usage.h"
#include "checkpoint/shared/holder_scan.h"
#include "checkpoint/staging/staging_hold.h"
#include "common/log.h"

namespace nvproxy::checkpoint {

struct CheckpointRequest {
  std::string container_id;
  bool keep_running = true;               // containerd's CheckpointOptions.exit == false
  std::filesystem::path diagnostic_path;  // BUNDLE/checkpoint-diagnostic.json; empty: not written
  // The container's init (host pid). A restore brings back the init's process tree only (runc
  // restores what CRIU dumped from it); processes outside it (started by exec) are named, and a CUDA
  // process among them refuses the checkpoint unless checkpoint.allow_lost_cuda_processes. 0: unknown.
  pid_t init_pid = 0;
  // Space check (with a SpaceProbe and checkpoint.check_space): where the runtime writes the image,
  // and containerd's root when containerd copies the image into its content store (empty: no copy).
  std::filesystem::path image_path;
  std::filesystem::path content_store;
  std::map<pid_t, std::uint64_t> device_bytes;  // CUDA processes' device memory, asked before any toggle
  // The host pid whose memory bears the driver's staging of every CUDA process, where it is not
  // each process's own: a gVisor sandbox's, as nvproxy's clients' memory is the sentry's memory
  // file, charged to the sandbox's cgroup (device_bytes then holds the sandbox's device memory
  // under this pid, as NVML reports it). 0: each CUDA process bears its own.
  pid_t staging_pid = 0;
  // The runtime's dump leaves zero pages out (CRIU with --skip-zero-pages, runsc's option): an image
  // that does not fit as allocated is counted again, as written, once device memory is staged.
  bool zero_pages_left_out = false;
  // Where the memory limits lifted for the driver's staging are recorded (limit_lift.h); empty:
  // nothing is lifted (refused instead when a limit would be crossed).
  std::filesystem::path lift_record;
};

// The host pid whose memory cgroup bears the staging (staging_pid, else the init's); 0: unknown.
pid_t staging_anchor(const CheckpointRequest& req);

// A CUDA process the checkpoint recorded, looked for after the runtime's restore.
struct ExpectedProcess {
  pid_t pid = 0;     // in the container's pid namespace (the same after a restore)
  std::string name;  // comm
};

// The runtime's checkpoint (`runc checkpoint --image-path ...`); throws Error on failure, with code
// DeadlineExceeded (a DeadlineError, ideally) when it ran out of time and was killed. A snapshot
// with a non-empty ReleasePlan must load the release plugin (release.h).
using SnapshotFn = std::function<void()>;
using ReleasingSnapshotFn = std::function<void(const ReleasePlan&)>;

struct CheckpointOutcome {
  std::vector<pid_t> toggled;             // CUDA processes checkpointed for the snapshot
  std::vector<pid_t> lost;                // toggled, but outside the init's tree: a restore will not bring them back
  std::vector<ReleasedProcess> released;  // forked children whose inherited device files the image leaves out
  std::vector<PhaseTiming> phases;
  std::vector<std::string> warnings;
};

struct ResumeOutcome {
  std::vector<pid_t> resumed;  // restored and unlocked
  std::vector<PhaseTiming> phases;
};

// What `diagnose` shows: holders, CUDA states, and whether a checkpoint would be refused.
struct Inspection {
  Diagnostic diagnostic;
  bool would_refuse = false;
  std::string sandbox;  // "runsc": pids are the sandbox's own
};

namespace detail {
// What one classification of the device holders found (orchestrator_parts.h): internal to the
// orchestrator's files, declared here only for its private members' signatures.
struct Classified;
}  // namespace detail

// Everything the Orchestrator asks and may use, given whole to its constructor: each runtime
// variant assembles its set in exactly one place (host_assembly.cc, sandbox_assembly.cc), so that a
// checkpoint, a restore and `diagnose` cannot be built with different tools.
struct OrchestratorTools {
  ProcessLister* lister = nullptr;   // required
  HolderScanner* scanner = nullptr;  // required
  CudaToggler* toggler = nullptr;    // null: CUDA toggling is off (checkpoint.cuda: none); the snapshot runs directly
  GpuUsageProbe* probe = nullptr;    // null: no multi-GPU preflight
  // The preflight also refuses ranks of a collective (NCCL) that this probe finds.
  CommProbe* comm = nullptr;
  // With it (and checkpoint.check_space) the checkpoint is refused before any toggle when its image
  // cannot fit (space_check.h).
  SpaceProbe* space = nullptr;
  // The checkpoint is refused before any toggle when the runtime's snapshot cannot work on this
  // host (snapshot_check.h), whether or not GPU processes are there.
  SnapshotCheck* snapshot_check = nullptr;
  // Host pids only: every process is held from the scan on, and no driver call is made on a pid
  // that no longer is the process found (process_holds.h).
  ProcessHolds* holds = nullptr;
  // Host pids only: the container is held still from the CUDA lock to the resume
  // (container_hold.h); without it, its threads run while their CUDA state is checkpointed.
  ContainerHold* hold = nullptr;
  // Without a hold: why there is none ("runsc: ..."), for the refusal of processes that die unheld
  // (JAX); empty: checkpoint.hold_still is off.
  std::string hold_unavailable;
  // Tells a forked child's inherited device files from ones it opened itself (file_identity.h),
  // for the refusal's table and hint.
  FileIdentity* files = nullptr;
  // Whether the snapshot can release forked children's inherited device files (release.h): ""
  // when it can, else why not, for the refusal's hint; with checkpoint.release_inherited off
  // nothing is released either way. Needs `files`. `release_way`: how the snapshot releases them
  // (the CRIU plugin needs character devices).
  std::string release_unavailable = "not set up";
  ReleaseWay release_way = ReleaseWay::CriuPlugin;
  // The memory limits over the container (over CheckpointRequest::staging_pid's where it is set)
  // and the host's memory, against which the driver's staging of device memory is billed before
  // any toggle (staging_bill.h); null: not billed. `reservations`: the host-wide account of
  // staging in flight; null: this checkpoint counts alone.
  MemoryProbe* memory = nullptr;
  HostReservations* reservations = nullptr;
};

class Orchestrator {
 public:
  // Throws Error(Internal) without a lister or a scanner.
  Orchestrator(CheckpointConfig cfg, const OrchestratorTools& tools, Logger& log);

  // Throws Error(FailedPrecondition) with the diagnostic text when refused or rolled back; the
  // snapshot's own Error code when the snapshot failed (after rollback); Error(Internal) when the
  // snapshot was written but CUDA could not be resumed. A snapshot that ran out of time gives
  // Error(DeadlineExceeded): "snapshot (runc checkpoint) did not finish within N ms; <what was done
  // about it>; CUDA restored in pids ...", and the diagnostic JSON gets a "deadline" object
  // (phase, command, timeout_ms, killed_pgid, aftermath).
  // Named for what it does around the runtime's own checkpoint (`snapshot`): CUDA is locked and
  // checkpointed in every process before it and resumed after it.
  CheckpointOutcome checkpoint_around(const CheckpointRequest& req, const ReleasingSnapshotFn& snapshot);
  CheckpointOutcome checkpoint_around(const CheckpointRequest& req, const SnapshotFn& snapshot) {
    return checkpoint_around(req, ReleasingSnapshotFn([&](const ReleasePlan&) { snapshot(); }));
  }

  // After the runtime's restore: lists the pids again (host pids change), restores and unlocks
  // every process whose CUDA state is checkpointed (and unlocks locked ones), in parallel.
  // Throws Error(FailedPrecondition) naming the stuck processes.
  // `expected`: the CUDA processes the checkpoint recorded; one that is not CUDA-checkpointed in the
  // restored container (gone, or not in the image) fails the restore too, naming it.
  // device_map: the container comes back on other GPUs (restore_preflight.h's check says which);
  // every checkpointed process is restored with it.
  // container_pid: a listed pid in the namespace `expected` uses (default: the host pid's NSpid).
  // left_stopped: the runtime's restore left every process stopped (CRIU's leave-stopped), so that
  // none runs before its CUDA state is back: they are held (set_container_hold) for the CUDA
  // restore and let go after it; without a hold, or on any failure, they are continued (SIGCONT).
  ResumeOutcome restore_after_runtime_restore(const std::string& container_id, const std::filesystem::path& diagnostic_path = {},
                                              const std::vector<ExpectedProcess>& expected = {}, const DeviceMap& device_map = {},
                                              const std::function<pid_t(pid_t)>& container_pid = {}, bool left_stopped = false);

  // Read-only: nothing is toggled. The same decision as checkpoint()'s (decide()), on the same
  // request: with init_pid, processes outside the init's tree are told; with image_path (and a
  // space probe), whether the image fits.
  Inspection inspect(const CheckpointRequest& req);
  Inspection inspect(const std::string& container_id) { return inspect(CheckpointRequest{.container_id = container_id}); }

  using Classified = detail::Classified;  // internal, shared by checkpoint() and inspect()

 private:
  // What the driver could checkpoint but never restore (contexts on several GPUs, collective
  // ranks, CUDA IPC) or will not checkpoint (managed memory), found before anything is toggled.
  struct Preflight {
    std::map<pid_t, std::set<std::string>> gpus;
    std::string probe_error;  // the GPU probe failed: nothing above can be told
    std::vector<ProcessReport> multi_gpu;
    std::vector<ProcessReport> ranks;
    std::vector<ProcessReport> ipc;      // took part in CUDA IPC (importers cannot be restored)
    std::vector<ProcessReport> managed;  // hold managed memory (the driver refuses to checkpoint it)
    std::vector<ProcessReport> unheld;   // would die while checkpointed: nothing holds them still (runsc)
  };
  struct Refusal {
    std::string reason;
    std::vector<ProcessReport> processes;
    std::string phase = "preflight";  // which step refused: runtime, classify, preflight, tree, space
  };
  // The one policy of checkpoint() and inspect() (orchestrator_decide.cc): whether a checkpoint of
  // what the scan and the classification found goes ahead, refused before anything is toggled.
  // In order: the runtime's own snapshot check (CRIU against the kernel), holders the toggle cannot
  // release, what the driver cannot restore (Preflight), CUDA processes outside the init's tree,
  // and whether the image fits.
  struct Decision {
    std::optional<Refusal> refusal;
    std::vector<std::string> warnings;
    std::vector<pid_t> lost;                            // CUDA, outside the init's tree, checkpointed anyway
    nlohmann::json details = nlohmann::json::object();  // the diagnostic's "criu", "not_restored", "space"
    Preflight preflight;                                // what it found about GPUs (inspect shows it)
    // The image does not fit as allocated, but the dump leaves zero pages out: counted again after
    // the CUDA checkpoint (space_as_written), this being the reason as allocated.
    std::string space_as_allocated;
    // The driver's staging against the memory limits and the host (staging_bill.h): what to lift.
    std::optional<StagingPlan> staging;
    StagingBill bill;
  };
  // c == nullptr: no device holders, or CUDA toggling is off: only the runtime's check applies.
  Decision decide(const CheckpointRequest& req, const std::vector<pid_t>& pids, const Classified* c,
                  std::vector<PhaseTiming>& phases);
  std::optional<Refusal> runtime_refusal(const std::vector<pid_t>& pids, Decision& d, std::vector<PhaseTiming>& phases,
                                         const std::string& id);
  std::optional<Refusal> blocker_refusal(const Classified& c) const;
  std::optional<Refusal> outside_tree(const CheckpointRequest& req, const std::vector<pid_t>& pids, const Classified& c,
                                      Decision& d);
  // check_space() for this request's image path (the shim's store or not); throws Error.
  SpaceVerdict space_verdict(const CheckpointRequest& req, const SpaceNeed& need);
  // After the CUDA checkpoint, with device memory staged: what the dump will write, zero pages
  // left out; a refusal (the caller rolls CUDA back) when even that does not fit.
  std::optional<Refusal> space_as_written(const CheckpointRequest& req, const std::vector<pid_t>& pids, const Classified& c,
                                          const std::string& as_allocated, nlohmann::json& details,
                                          std::vector<PhaseTiming>& phases);
  std::optional<Refusal> space_refusal(const CheckpointRequest& req, const std::vector<pid_t>& pids, const Classified& c,
                                       Decision& d, std::vector<PhaseTiming>& phases);
  // The staging's bill and plan (staging_bill.h); a refusal when the host has no room or a limit
  // would be crossed under checkpoint.staging_memory: refuse.
  std::optional<Refusal> staging_refusal(const CheckpointRequest& req, const Classified& c, Decision& d,
                                         std::vector<PhaseTiming>& phases);
  Preflight preflight(const Classified& c);
  // Pids (of `pids`) outside the init's process tree, in pid order; empty when init is unknown.
  std::vector<pid_t> outside_init_tree(pid_t init, const std::vector<pid_t>& pids);
  // nullopt: go ahead (checkpoint.allow_unrestorable turns every finding into a warning).
  [[nodiscard]] std::optional<Refusal> refusal(const Preflight& pf) const;
  [[nodiscard]] std::vector<std::string> preflight_warnings(const Preflight& pf) const;

  // One attempt of a checkpoint (attempt.h): it owns what it found and toggled, and runs the
  // phases after decide() as its methods; its guards (attempt_guards.h) own what was toggled and
  // the container's hold. Again: its answer "again, with these newcomers".
  class Attempt;
  class Toggled;
  class HoldGuard;
  struct Again;
  // Holders without CUDA across the attempts of one checkpoint: when each was first seen, and until
  // when a scan that finds only new such holders is made again.
  struct NotCudaSeen {
    std::map<pid_t, std::chrono::steady_clock::time_point> since;
    std::chrono::steady_clock::time_point rescan_until;
  };
  // Which of `pids` have ended, and why: the process holds say (host pids); without them (a
  // sandbox's pids) a pid no longer among the container's processes has ended. Each is given
  // `grace` to go: a toggle fails while its process is ending (its CUDA already torn down).
  std::map<pid_t, std::string> ended_among(const std::vector<pid_t>& pids, std::chrono::milliseconds grace);

  struct Resumed {
    std::vector<pid_t> running;
    std::vector<StuckProcess> stuck;
    std::vector<pid_t> ended;  // gone meanwhile: nothing to bring back, nothing stuck
  };
  Classified classify(const std::string& id, const std::vector<Holder>& holders);
  // Brings each pid back to running from whatever state the driver reports (believed: the state we
  // left it in, used when the driver cannot say); a pid that does not come back is tried once more.
  Resumed bring_back(const std::vector<pid_t>& pids, const std::map<pid_t, CudaState>& believed, const DeviceMap& map = {});
  std::optional<StuckProcess> bring_back_once(pid_t pid, const std::map<pid_t, CudaState>& believed, const DeviceMap& map);
  std::map<pid_t, std::set<std::string>> probe_gpus(std::string& error);
  std::vector<ProcessReport> collective_ranks(const Classified& c, const std::map<pid_t, std::set<std::string>>& gpus);
  ProcessReport report_for(pid_t pid, const std::vector<Holder>& holders);
  // A holder without CUDA: are its device fds the open files of its nearest CUDA ancestor? Fills
  // r.inherited_* and r.hint; false when nothing is inherited (or it cannot be told).
  bool explain_inherited(pid_t pid, const ProcInfo& self, const Classified& c, ProcessReport& r);
  // Whether pid's fd is one of the open file descriptions among anc's device fds (`theirs`).
  bool shares_open_file(pid_t pid, int fd, pid_t anc, const std::vector<Holder>& theirs);
  // The nearest ancestor of `self` that is a running CUDA process of this container; 0 if none.
  pid_t cuda_ancestor(const ProcInfo& self, const Classified& c);
  // A holder explained as inherited (r.inherited_*): released when everything it holds is its
  // ancestor's and the release is available; false leaves it a blocker (its hint says why).
  bool try_release(ProcessReport& r, Classified& c);
  // CUDA processes forked from a CUDA process that still hold its device files: refused (the
  // driver's checkpoint of a forked CUDA child is not supported); removed from c.cuda.
  void refuse_forked_cuda(Classified& c);
  // Throws CudaError(op, "not asked") when pid is no longer the process the scan found.
  void ensure_held(pid_t pid, const char* op);

  // What the runtime variant's tools allow (OrchestratorTools' optional ones), read once: the
  // phases ask these, not whether a tool is there.
  struct Capabilities {
    bool toggles_cuda = false;        // a toggler; without one the runtime's snapshot runs alone
    bool holds_still = false;         // a container hold with CUDA toggled: nothing runs from the lock to the
                                      // resume; without one, newcomers are taken in while the rest runs on
    bool guards_pids = false;         // process holds: no driver call on a pid that is no longer the process found
    bool checks_snapshot = false;     // the runtime's snapshot is checked against this host first
    bool bills_staging = false;       // the driver's staging is billed against the memory limits and the host
    bool probes_gpus = false;         // NVML: which GPUs each process uses (multi-GPU refusals, the record)
    bool probes_collectives = false;  // NCCL ranks told from independent processes
    bool identifies_files = false;    // open file descriptions compared: inherited device files explained
    bool checks_space = false;        // the image's room on its disk, from each process's memory
  };
  static Capabilities capabilities_of(const OrchestratorTools& t);

  CheckpointConfig cfg_;
  ProcessLister& lister_;
  HolderScanner& scanner_;
  CudaToggler* toggler_;
  GpuUsageProbe* probe_;
  CommProbe* comm_;
  SpaceProbe* space_;
  SnapshotCheck* snapshot_check_;
  ProcessHolds* holds_;
  ContainerHold* hold_;
  std::string hold_unavailable_;
  FileIdentity* files_;
  std::string release_unavailable_;
  ReleaseWay release_way_;
  MemoryProbe* memory_;
  HostReservations* reservations_;
  Capabilities can_;
  Logger& log_;
};

}  // namespace nvproxy::checkpoint
