// The shim's own record in a checkpoint image (IMAGE/nvproxy-cuda.json): which processes carry
// checkpointed CUDA state that the restore must bring back, and what they used (the restore
// preflight's "gpu" facts). One type, written by the checkpoint of either runtime and read by the
// restore, the preflight and the tests; versioned so that a later shim still reads what an earlier
// one wrote (0.3.0 and before wrote no "version": read as version 0, the same fields).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/image/gpu_record.h"
#include "checkpoint/image/host_files.h"
#include "checkpoint/image/pod_record.h"

namespace nvproxy::checkpoint {

struct ImageProcess {
  pid_t pid = 0;     // in the container's pid namespace (runc) or the sandbox's (runsc): the same after a restore
  std::string name;  // comm at checkpoint, "python3"

  bool operator==(const ImageProcess&) const = default;
};

// A forked child whose inherited GPU device files the image leaves out (checkpoint/attempt/release.h):
// after a restore those fds are /dev/null.
struct ImageReleased {
  pid_t pid = 0;  // in the container's pid namespace
  std::string name;
  pid_t from = 0;  // the CUDA ancestor, same namespace
  std::vector<int> fds;

  bool operator==(const ImageReleased&) const = default;
};

struct ImageRecord {
  // 2: with `released` (a shim before 0.4.0 reads 2 as too new and refuses the restore, which it
  // could not do: it would not load the release plugin); 1 is written when nothing was released.
  static constexpr int kVersion = 2;
  static constexpr int kVersionWithoutReleased = 1;
  static constexpr const char* kFileName = "nvproxy-cuda.json";

  int version = kVersion;
  std::string container;
  std::string sandbox;                          // "runsc" for a gVisor sandbox's image, else empty
  int cuda_processes = 0;                       // how many the restore brings back (0: no CUDA in this image)
  std::vector<ImageProcess> cuda_pids;          // each of them: after the restore, each must be there
  std::vector<ImageProcess> cuda_not_restored;  // toggled, but outside the init's tree (allowed by configuration)
  std::optional<GpuRecord> gpu;                 // what they used, for the restore preflight
  std::string gpu_error;                        // why `gpu` is missing, when there are CUDA processes
  // A gVisor sandbox's device memory as the host's NVML reported it for the sentry before the
  // toggles (0.7.0 on; 0: unknown): the driver staged it in the sentry's memory, which the image
  // keeps and runsc's restore brings back, so the restore bills it (restore_staging.h).
  std::uint64_t sandbox_device_bytes = 0;
  // What the sandbox's memory cgroup was charged just before runsc's snapshot, its staging included
  // (0.9.0 on; 0: unknown): the sentry's restored memory file holds as much, so a restore bills it.
  std::uint64_t sandbox_memory_bytes = 0;
  std::vector<ImageReleased> released;  // version 2, written by 0.4.0 on; absent: none
  // What wrote the image (0.6.0 on; absent before, then nothing is checked): the runtime's kind and
  // version as it prints it, and the CRIU version (runc, crun). A restore on another node checks
  // them before the runtime runs (checkpoint/session/session_restore.cc).
  std::string runtime;          // "runc", "crun", "runsc"
  std::string runtime_version;  // "1.1.5+ds1", "release-20260817.0-70-g3c5eee17d"
  std::string criu_version;     // "4.2.1"
  // The host's files on the container's bind mounts that the restore opens again (0.9.0 on:
  // host_files.h); a later restore checks the image's own list against the node it runs on, this
  // one is what the checkpoint saw, for an operator who moves the image (`diagnose --image`).
  std::vector<HostFile> host_files;
  bool host_files_listed = false;  // absent in older records: nothing was listed
  // Where the checkpoint's time went (0.9.0 on): each phase's milliseconds as the log gives them
  // (lock, checkpoint, snapshot, CRIU's own criu_frozen, criu_memwrite, ...), and how long the
  // workload was stopped (0: not told). Shown by `diagnose --image`.
  std::vector<std::pair<std::string, double>> checkpoint_phases;
  double stopped_ms = 0;
  // A gVisor pod's image (pod_record.h): every container of the sandbox by its name in the pod.
  // Absent: one container's image (runc, crun, or a runsc sandbox of its own).
  std::optional<PodRecord> pod;

  [[nodiscard]] bool has_cuda() const { return cuda_processes > 0; }
};

nlohmann::json to_json(const ImageRecord& r);
// Throws Error(InvalidArgument) naming the malformed field.
ImageRecord image_record_from_json(const nlohmann::json& j);

// IMAGE_DIR/nvproxy-cuda.json; nullopt when there is none (an image of another shim or runtime).
// Throws Error(InvalidArgument) naming the file when it is unreadable or malformed: a restore that
// ignored it would leave CUDA processes checkpointed.
std::optional<ImageRecord> read_image_record(const std::filesystem::path& image_dir);
// Writes it atomically; throws Error naming the file.
void write_image_record(const std::filesystem::path& image_dir, const ImageRecord& r);

}  // namespace nvproxy::checkpoint
