// runsc global flags for a GPU container: gVisor only passes GPUs through with --nvproxy.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpu/gpu_config.h"

namespace nvproxy::gpu {

// {"--nvproxy"} (+ "--nvproxy-driver-version=X" when configured) for a GPU container, else {}.
// A GPU container: the record annotation lists nodes, the env/annotations request a GPU, or
// linux.devices already holds /dev/nvidia* (CRI injected CDI itself). gpu.nvproxy: auto = that
// rule; on = every container; off = never. These are global flags: put them before the subcommand.
std::vector<std::string> runsc_flags(const nlohmann::json& spec, const GpuConfig& cfg);

// The GPU-container rule above, on its own.
bool is_gpu_container(const nlohmann::json& spec, const GpuConfig& cfg);

}  // namespace nvproxy::gpu
