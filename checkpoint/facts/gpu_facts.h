// What NVML says about this host's GPUs: the driver version, each device (model, UUID, memory) and
// the device memory each process holds on it. Taken at checkpoint (what the CUDA processes used,
// recorded in the image) and before a restore (what the restoring host offers), see
// checkpoint/preflight/restore_preflight.h. Crosses the nvproxy-cuda-helper pipe as JSON.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace nvproxy::checkpoint {

struct GpuDeviceFacts {
  unsigned index = 0;                                                // NVML's device index
  std::string uuid;                                                  // "GPU-79f8..."
  std::string name;                                                  // the model, "NVIDIA H200"
  std::uint64_t memory_total = 0, memory_free = 0, memory_used = 0;  // bytes
};

struct GpuProcessUse {
  std::string uuid;                         // the device
  std::optional<std::uint64_t> used_bytes;  // absent when NVML cannot say (NVML_VALUE_NOT_AVAILABLE)
};

struct GpuHostFacts {
  std::string driver_version;  // "580.159.04"
  std::vector<GpuDeviceFacts> devices;
  std::map<pid_t, std::vector<GpuProcessUse>> processes;  // host pid -> devices it has compute contexts on
};

// "580" of "580.159.04": the driver branch (the text before the first '.').
std::string driver_branch(const std::string& version);
// "4.7 GiB", "512.0 MiB", "800 B": one decimal, binary units.
std::string format_bytes(std::uint64_t bytes);

nlohmann::json to_json(const GpuHostFacts& f);
// Throws Error(Internal) naming what is malformed.
GpuHostFacts host_facts_from_json(const nlohmann::json& j);

}  // namespace nvproxy::checkpoint
