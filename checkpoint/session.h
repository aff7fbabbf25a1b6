// One checkpoint or one restore of one container: the use case the task layer hands its Checkpoint
// and Restore RPCs to. It owns the order of things around the Orchestrator (which toggles CUDA):
// the thaw of a client-paused container, the GPU facts taken before any toggle, the runtime's
// snapshot under its deadline, the image's record (image_record.h), and on restore the preflight
// against this host's GPUs and the CUDA restore afterwards. The same code runs for runc, crun and
// runsc: what differs is behind SessionTools (where questions go) and SessionRuntime (the runtime's
// verbs), both narrow so that tests drive a whole session with fakes.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/config.h"
#include "checkpoint/image_record.h"
#include "checkpoint/session_runtime.h"
#include "checkpoint/session_tools.h"
#include "common/log.h"

namespace nvproxy::checkpoint {

struct SessionTarget {
  std::string id;
  std::filesystem::path bundle;  // checkpoint-diagnostic.json and nvproxy-device-map.json go here
  std::string content_store;     // containerd's root, where it copies an image it asked for (space check)
  // The GPUs the container asks for as restore-preflight tokens ("0", "GPU-...", "all"); empty:
  // no restriction (restore_preflight.h's visible_gpus).
  std::vector<std::string> requested_gpus;
};

struct SnapshotRequest {
  bool leave_running = false;  // containerd's CheckpointOptions.exit == false
  bool paused = false;         // the client froze the task first (containerd does); frozen again on return
  std::filesystem::path image_path;
};

inline constexpr const char* kDiagnosticFile = "checkpoint-diagnostic.json";
// BUNDLE/nvproxy-device-map.json: the GPU pairs the restore preflight chose, for the CUDA restore.
inline constexpr const char* kDeviceMapFile = "nvproxy-device-map.json";

class CheckpointSession {
 public:
  CheckpointSession(SessionTarget target, SessionRuntime& rt, SessionTools& tools, Logger& log)
      : t_(std::move(target)), rt_(rt), tools_(tools), log_(log) {}

  // Toggles CUDA off for every process holding a GPU, verifies, runs the runtime's snapshot and
  // brings CUDA back if the task keeps running; then records the image. On failure everything is
  // rolled back and an Error carries the diagnostic (also BUNDLE/checkpoint-diagnostic.json); the
  // container keeps running. A snapshot killed for running out of time leaves the container thawed
  // (unless the client had paused it and nothing needs it running) and CUDA rolled back:
  // Error(DeadlineExceeded) says which phase ran out of time.
  void checkpoint(const SnapshotRequest& req);

  // What `diagnose` shows: the decision a checkpoint into `image` would reach now, from the same
  // request and the same orchestrator as checkpoint(), with nothing toggled, paused or thawed.
  Inspection inspect(const std::filesystem::path& image);

  // Before the runtime restores (nothing runs yet): when the image's record says CUDA processes
  // were checkpointed, compares the GPUs, memory and driver branch it records with this host's and
  // throws Error(FailedPrecondition) naming each process and GPU this host cannot give back. A
  // record without GPU facts (shim 0.2.0, a sandbox) is restored as before, with a log line.
  // Returns whether the runtime's restore is to leave the processes stopped (CRIU's leave-stopped):
  // CUDA processes are in the image and the container is held still (checkpoint.hold_still), so
  // that none of its threads runs before its CUDA state is back.
  [[nodiscard]] bool before_restore(const std::filesystem::path& image);

  // After the runtime restored the container: restores and unlocks CUDA in every checkpointed
  // process; each one the record names must be among them. left_stopped: what before_restore
  // asked for; the processes are held for the CUDA restore, then let go.
  void after_restore(const std::filesystem::path& image, bool left_stopped = false);

 private:
  // The orchestrator's request: with CUDA holders seen from the host, the init (for processes
  // outside its tree), where the image goes and what each process holds on its GPU (space check).
  CheckpointRequest request(bool leave_running, const std::filesystem::path& image, bool cuda_holders,
                            const std::optional<GpuHostFacts>& facts);
  void check_released(const ImageRecord& rec, const std::vector<pid_t>& cuda, const std::string& who);

  SessionTarget t_;
  SessionRuntime& rt_;
  SessionTools& tools_;
  Logger& log_;
};

}  // namespace nvproxy::checkpoint
