// The GPU device layer: what the shim calls at container Create, between reading config.json and
// `RUNTIME create`. Resolves the container's GPU request (env NVIDIA_VISIBLE_DEVICES /
// NVIDIA_DRIVER_CAPABILITIES, CDI annotations) through CDI specs or host discovery and edits the
// spec: device nodes with host major/minor, device cgroup rules, one read-only bind per driver
// file, env, hooks, plus the record annotation (gpu/record.h).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/log.h"
#include "gpu/gpu_config.h"

namespace nvproxy::gpu {

struct DeviceLayerResult {
  bool gpu_requested = false;
  std::string mode;                  // "cdi", "legacy", "cdi+legacy"; empty when nothing was applied
  std::vector<std::string> devices;  // resolved CDI names, or discovered GPU UUIDs
  nlohmann::json record;             // also written to annotations["nvproxy.containerd.io/gpu"]
  size_t added = 0;                  // edits newly added (0 on a repeated apply)
  std::vector<std::string> warnings;
};

// Edits `spec` in place. No GPU request (or mode off): spec untouched, gpu_requested=false.
// Throws Error naming the CDI file+field, the env variable or the annotation at fault; an
// unresolvable CDI device's message also lists the spec files that failed to load. `log` gets the
// per-file CDI load errors (warn) and a debug summary; `warnings` are returned, not logged.
DeviceLayerResult apply_device_layer(nlohmann::json& spec, const GpuConfig& cfg, Logger& log);

// What apply_device_layer would do to `spec` (which is not changed): as text for people, or as JSON
// {"gpuRequested","mode","devices","added","record","warnings","runscFlags","spec"} with as_json.
std::string describe_edits(const nlohmann::json& spec, const GpuConfig& cfg, bool as_json);

}  // namespace nvproxy::gpu
