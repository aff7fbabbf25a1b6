// One checkpoint, one restore or one inspection of one container: the use case the task layer
// hands its Checkpoint and Restore RPCs (and `diagnose`) to, one call each. It owns the order of
// things around the Orchestrator (which toggles CUDA): the thaw of a client-paused container, the
// GPU facts taken before any toggle, the runtime's snapshot under its deadline, the image's record
// (image/image_record.h) and, with an image store, the entry the snapshot goes into; on restore the
// store lookup, the preflight against this host's GPUs, the runtime's restore and the CUDA restore
// afterwards. The same code runs for runc, crun and runsc: what differs is behind SessionTools
// (where questions go) and SessionRuntime (the runtime's verbs), both narrow so that tests drive a
// whole session with fakes.
#pragma once

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/config.h"
#include "checkpoint/image/image_puller.h"
#include "checkpoint/image/image_record.h"
#include "checkpoint/image/pod_record.h"
#include "checkpoint/session/session_runtime.h"
#include "checkpoint/session/session_tools.h"
#include "common/error.h"
#include "common/log.h"

namespace nvproxy::checkpoint {

struct SessionTarget {
  std::string id;
  std::filesystem::path bundle;  // checkpoint-diagnostic.json goes here
  std::string ns;                // containerd's namespace: the image store keeps each one's entries apart
  std::string content_store;     // containerd's root, where it copies an image it asked for (space check)
  // The GPUs the container asks for as restore-preflight tokens ("0", "GPU-...", "all"); empty:
  // no restriction (restore_preflight.h's visible_gpus).
  std::vector<std::string> requested_gpus;
  // The runtime writes CRIU page files (runc, crun) and checkpoint.skip_zero_pages is on: their zero
  // pages are punched out after the snapshot (zero_pages.h).
  bool punch_zero_pages = false;
  // The runtime's dump itself leaves zero pages out (CRIU with --skip-zero-pages): the space check
  // may count what will be written (CheckpointRequest::zero_pages_left_out).
  bool zero_pages_left_out = false;
  // checkpoint.staging_memory and its margin, for a restore's staging (restore_staging.h).
  StagingMode staging_mode = StagingMode::Lift;
  std::uint64_t staging_margin = std::uint64_t{256} << 20;
  // The pod whose sandbox a runsc checkpoint saves whole (image/pod_record.h): written into the
  // image's record. None: a container of its own.
  std::optional<PodRecord> pod;
  // The container's OCI spec as JSON, read from its bundle by the task layer (checkpoint/ reads no
  // spec itself): the bind mounts the image's host files are on (image/host_files.h). Throws
  // Error; unset: an Error, so that the image lists no host files.
  std::function<nlohmann::json()> spec;
};

struct SnapshotRequest {
  bool leave_running = false;         // containerd's CheckpointOptions.exit == false
  bool paused = false;                // the client froze the task first (containerd does); frozen again on return
  std::filesystem::path image_path;   // the directory containerd handed over
  std::filesystem::path image_store;  // checkpoint.image_store; empty: off
  unsigned image_store_keep = 3;      // checkpoint.image_store_keep
};

struct RestoreRequest {
  // What containerd handed over: an image directory, or a reference to one (the store's entry, or
  // a registry's image: image_transfer.h).
  std::filesystem::path checkpoint;
  std::filesystem::path image_store;  // checkpoint.image_store; empty: off
  ImagePuller* puller = nullptr;      // how a registry reference is pulled (image_puller.h); null: refused
  // A container of a gVisor pod restored whole: runsc resumes the sandbox only once its last
  // container is restored, so CUDA cannot come back before; resume_cuda() does it then.
  bool cuda_later = false;
  // The container's name in the pod restored whole: resume_cuda() brings CUDA back only in the
  // container of this name the image's record names (the others have no CUDA processes of its).
  std::string pod_member;
};

inline constexpr const char* kDiagnosticFile = "checkpoint-diagnostic.json";

// How long a leave-running checkpoint stopped the workload, from its phases: with CUDA toggled,
// from the first lock to the last unlock; without, CRIU's frozen time. 0 when neither is known.
double stopped_ms(const std::vector<PhaseTiming>& phases);

class CheckpointSession {
 public:
  CheckpointSession(SessionTarget target, SessionRuntime& rt, SessionTools& tools, Logger& log)
      : t_(std::move(target)), rt_(rt), tools_(tools), log_(log) {}

  // Toggles CUDA off for every process holding a GPU, verifies, runs the runtime's snapshot and
  // brings CUDA back if the task keeps running; then records the image. With an image store the
  // snapshot goes into a fresh entry of it, the client's directory gets a reference to it
  // (image/image_store.h) and the container's entries beyond the store's keep are removed. On
  // failure everything is rolled back (the entry too) and an Error carries the diagnostic (also
  // BUNDLE/checkpoint-diagnostic.json); the container keeps running. A snapshot killed for running
  // out of time leaves the container thawed (unless the client had paused it and nothing needs it
  // running) and CUDA rolled back: Error(DeadlineExceeded) says which phase ran out of time.
  void checkpoint(const SnapshotRequest& req);

  // What `diagnose` shows: the decision a checkpoint into `image` would reach now, from the same
  // request and the same orchestrator as checkpoint(), with nothing toggled, paused or thawed.
  Inspection inspect(const std::filesystem::path& image);

  // The restore verb, whole: finds the image (the store's entry where containerd handed over the
  // store's reference), refuses what this host's GPUs cannot give back before anything runs
  // (comparing the GPUs, memory and driver branch the image records with this host's; a record
  // without GPU facts, from shim 0.2.0 or a sandbox, is restored as before, with a log line),
  // has the runtime restore it, and brings CUDA back in every process the image records, onto the
  // GPUs the preflight chose. When CUDA processes come back and the container is held still
  // (checkpoint.hold_still), the runtime leaves them stopped and they are held until their CUDA
  // state is back, so that none of their threads runs before. Throws Error(FailedPrecondition)
  // naming each process and GPU this host cannot give back; after the runtime restored, a CUDA
  // failure removes the restored container (SessionRuntime::remove) and the Error says so.
  void restore(const RestoreRequest& req);

  // restore()'s first half alone, ahead of it (a restore by annotation, at Create): the image
  // found or pulled into the store, its record checked against this host's runtime and GPUs.
  // Nothing runs; the restore later finds the same entry. Throws as restore() does.
  void fetch(const RestoreRequest& req);

  // restore()'s last part alone, after it (RestoreRequest::cuda_later): CUDA back in every process
  // the image records, once the pod's sandbox runs. Throws as restore() does, with the restored
  // container removed.
  void resume_cuda(const RestoreRequest& req);

 private:
  // checkpoint() into `image`: the client's directory or the store's entry.
  void snapshot_into(const SnapshotRequest& req, const std::filesystem::path& image);
  // The orchestrator's request: with CUDA holders seen from the host, the init (for processes
  // outside its tree), where the image goes and what each process holds on its GPU (space check).
  CheckpointRequest request(bool leave_running, const std::filesystem::path& image, bool cuda_holders,
                            const std::optional<GpuHostFacts>& facts);
  // What the restore preflight decided, before the runtime restores.
  struct RestorePlan {
    std::optional<ImageRecord> record;  // none: not this shim's image
    bool leave_stopped = false;
    DeviceMap device_map;  // the container comes back on other GPUs
  };
  RestorePlan plan_restore(std::optional<ImageRecord> record);
  // The image the runtime restores, with its plan; a registry's image is pulled into the store
  // after its record passed the plan's checks.
  std::filesystem::path find_image(const RestoreRequest& req, RestorePlan& plan);
  // The runtime that wrote the image (its record) against the one here: runsc restores only its
  // own release's images, a sandbox's image no CRIU, a CRIU image no sandbox (refused); a CRIU
  // newer than this host's is a warning.
  void check_runtime(const ImageRecord& rec, const std::string& who);
  void stamp_runtime(ImageRecord& rec);
  // CRIU's own split of a dump or restore ("dump", "restore": its stats file in its work
  // directory) added to `phases`, and said in a sentence; "" without one (runsc).
  std::string criu_phases(std::vector<PhaseTiming>& phases, const std::string& what);
  // What the sandbox's memory cgroup holds now, less its reclaimable cache (the sentry `sentry`'s):
  // with every staging in it, what its restore will hold. 0 when it cannot be read (a warning).
  std::uint64_t sandbox_charge(pid_t sentry);
  void resume_cuda(const ImageRecord& rec, const RestorePlan& plan);
  // After the runtime restored but CUDA failed: the restored container removed, `e` thrown with
  // what happened to it (and the OOM kill `oom` said first, when there was one).
  [[noreturn]] void throw_removed(const Error& e, const std::string& oom);
  void check_released(const ImageRecord& rec, const std::vector<pid_t>& cuda, const std::string& who);
  // The host's files the image depends on (image/host_files.h), as the container's spec maps them
  // here: listed into the record at checkpoint, checked before the runtime restores (refused with
  // every file that is gone or changed, nothing started). False: this image lists none it can tell.
  bool host_files_of(const std::filesystem::path& image, std::vector<HostFile>& out);
  void check_host_files(const std::filesystem::path& image);

  SessionTarget t_;
  SessionRuntime& rt_;
  SessionTools& tools_;
  Logger& log_;
};

}  // namespace nvproxy::checkpoint
