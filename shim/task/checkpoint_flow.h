// The Checkpoint RPC's work (GPU-aware, see checkpoint/) and the CUDA side of a restore.
#pragma once

#include <filesystem>
#include <string>

#include "common/log.h"
#include "common/process.h"
#include "oci/runtime.h"
#include "shim/task/config.h"

namespace nvproxy::shim {

// The container as the checkpoint flow sees it.
struct CheckpointTarget {
  std::string id;
  std::filesystem::path bundle;
  const ShimConfig& config;
  oci::Runtime* runtime;
  bool gpu = false;
  std::string restore_from;  // restore: the image the runtime restored from
};

struct CheckpointEnv {
  Logger& log;
  ProcessRunner& runner;
};

// Toggles CUDA off for every process holding a GPU, verifies, runs the runtime's checkpoint and
// brings CUDA back if the task keeps running. On failure everything is rolled back and an
// Error(FailedPrecondition) carries the diagnostic; the container keeps running.
// `paused`: the client froze the task first (containerd does); it is frozen again before returning.
// A runtime checkpoint that runs past checkpoint.snapshot_timeout_ms is killed with its process
// group (runc and CRIU), the container is thawed (unless the client had paused it and nothing
// needs it running) and CUDA rolled back: Error(DeadlineExceeded) says which phase ran out of time.
void run_checkpoint(CheckpointTarget& c, const oci::CheckpointFlags& flags, bool paused, const CheckpointEnv& env);
// Before the runtime restores (nothing runs yet): when the image's record says CUDA processes were
// checkpointed, compares the GPUs, memory and driver branch it records with this host's (NVML via
// nvproxy-cuda-helper) and throws Error(FailedPrecondition) naming each process and GPU this host
// cannot give back (also written to BUNDLE/checkpoint-diagnostic.json), or when this host's NVML
// cannot be had. A record without GPU facts (shim 0.2.0) is restored as before, with a log line.
void check_restore_host(CheckpointTarget& c, const CheckpointEnv& env);
// After the runtime restored the container: restore + unlock CUDA in every checkpointed process.
void restore_cuda_after_runtime_restore(CheckpointTarget& c, const CheckpointEnv& env);

}  // namespace nvproxy::shim
