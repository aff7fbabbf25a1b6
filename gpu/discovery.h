// Legacy mode: find what a GPU container needs on the host itself (no CDI spec), producing the same
// ContainerEdits a CDI spec would: device nodes, one read-only bind mount per real driver file, and
// soname links for the hook (never a bind of a symlink, never a recursive bind of a directory).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "gpu/container_edits.h"
#include "gpu/device_request.h"
#include "gpu/gpu_config.h"

namespace nvproxy::gpu {

struct HostGpu {
  std::string bus_id;  // directory name under gpus/ ("0000:3b:00.0"); empty without /proc info
  unsigned minor = 0;  // /dev/nvidia<minor>
  std::string uuid;    // "GPU-..."; empty without /proc info
};

// GPUs in index order (PCI bus order, as nvidia-smi numbers them) from PROC/gpus/*/information; when
// that tree is absent, the /dev/nvidia<N> nodes under dev_root in minor order.
std::vector<HostGpu> read_host_gpus(const std::string& proc_driver_root, const std::string& dev_root);
// "580.159.04" from PROC/version ("NVRM version: ... Kernel Module  580.159.04  ..."), or "".
std::string read_driver_version(const std::string& proc_driver_root);

// Follows symlinks of `path` (absolute, as seen from inside `root`) with absolute link targets taken
// relative to root, so a driver root mounted elsewhere resolves like the real one. Returns the real
// path inside root, or nullopt when a component is missing or links loop.
std::optional<std::filesystem::path> resolve_in_root(const std::filesystem::path& root, const std::filesystem::path& path);

struct Discovered {
  ContainerEdits edits;
  std::vector<std::string> devices;  // GPU UUIDs, or "nvidia<minor>" without /proc info
  std::vector<std::string> warnings;
};

// Throws Error(FailedPrecondition) when the driver is not there (no nvidiactl, no libcuda for
// compute), Error(NotFound) for a requested GPU that does not exist, naming the request.
Discovered discover(const GpuRequest& req, const GpuConfig& cfg);

}  // namespace nvproxy::gpu
