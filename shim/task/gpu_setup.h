// Create's GPU step: the device layer's edits to the container's spec, and the runtime flags a GPU
// container needs (runsc --nvproxy).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "common/log.h"
#include "oci/spec.h"
#include "shim/task/config.h"

namespace nvproxy::shim {

struct GpuSetup {
  bool gpu = false;                         // the device layer gave the container GPUs
  std::vector<std::string> runtime_global;  // per-container runtime flags
};

// Edits `spec` (and saves it into the bundle) when the container asks for GPUs.
GpuSetup prepare_gpu(const std::string& container_id, const std::filesystem::path& bundle, const ShimConfig& config,
                     oci::Spec& spec, const std::string& self_binary, Logger& log);

}  // namespace nvproxy::shim
