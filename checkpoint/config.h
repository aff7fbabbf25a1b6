// Checkpoint settings (the `checkpoint:` section of the shim's config; the shim parses the YAML).
#pragma once

#include <string>
#include <vector>

namespace nvproxy::checkpoint {

struct CheckpointConfig {
  std::string cuda = "driver-api";  // driver-api | cuda-checkpoint | none
  std::string cuda_checkpoint_path = "cuda-checkpoint";
  std::string libcuda = "libcuda.so.1";
  std::string libnvml = "libnvidia-ml.so.1";
  std::string cuda_helper;  // nvproxy-cuda-helper; empty: beside the shim, then ../libexec (cuda_helper_client.h)
  unsigned lock_timeout_ms = 10000;
  unsigned parallelism = 0;  // 0 = all at once, 1 = sequential
  std::vector<std::string> device_globs{"/dev/nvidia*"};
  bool allow_unrestorable = false;  // operator override of the multi-GPU refusal
  // Deadlines of the runtime's `checkpoint` (runc + CRIU writing the image) and `restore`; on expiry
  // the runtime's process group is killed (the shim hands these to oci::RuntimeConfig).
  unsigned snapshot_timeout_ms = 30 * 60 * 1000;
  unsigned restore_timeout_ms = 30 * 60 * 1000;
};

}  // namespace nvproxy::checkpoint
