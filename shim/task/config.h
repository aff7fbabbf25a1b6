// The shim's YAML configuration (/etc/containerd-shim-nvproxy/config.yaml by default).
// Which file is read: the runtime options' ConfigPath, then $NVPROXY_SHIM_CONFIG, then the default;
// a missing default file means built-in defaults, a missing explicit file is an error.
#pragma once

#include <filesystem>
#include <string>

#include "checkpoint/config.h"
#include "common/log.h"
#include "gpu/gpu_config.h"
#include "oci/runtime.h"

namespace nvproxy::shim {

inline constexpr const char* kDefaultConfigPath = "/etc/containerd-shim-nvproxy/config.yaml";
inline constexpr const char* kDefaultRuntimeRoot = "/run/containerd/runc";

struct ShimConfig {
  oci::RuntimeConfig runtime{.binary = "runc", .root = kDefaultRuntimeRoot};
  gpu::GpuConfig gpu;
  checkpoint::CheckpointConfig checkpoint;
  LogLevel log_level = LogLevel::Info;
  std::string source;  // file it came from, or "defaults"
};

// Parses YAML text; errors name `origin` and the key.
// The largest config file the shim reads (docs/configuration.md, "Bounds"); a larger one, or one
// that is not a regular file (/dev/zero, a FIFO), is refused naming the path.
inline constexpr std::size_t kMaxConfigBytes = 1u << 20;

ShimConfig parse_config(const std::string& yaml_text, const std::string& origin);
// Picks and loads the file as described above. `explicit_path` comes from the runtime options.
ShimConfig load_config(const std::string& explicit_path);

}  // namespace nvproxy::shim
