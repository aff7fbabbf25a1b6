// Settings of the device layer (the `gpu:` section of the shim's config.yaml).
#pragma once

#include <string>
#include <vector>

namespace YAML {
class Node;
}

namespace nvproxy::gpu {

struct GpuConfig {
  std::string mode = "auto";  // auto (CDI when a spec matches, else discovery) | cdi | legacy | off
  std::vector<std::string> cdi_spec_dirs{"/etc/cdi", "/var/run/cdi"};
  std::string driver_root = "/";                         // where driver libraries and tools live
  std::string dev_root = "/dev";                         // where host device nodes live
  std::string proc_driver_root = "/proc/driver/nvidia";  // gpus/*/information, version
  std::string nvproxy = "auto";                          // runsc --nvproxy: auto | on | off
  std::string nvproxy_driver_version;                    // runsc --nvproxy-driver-version (empty: none)
  std::string hook_binary;                               // absolute path of our binary for the OCI hook; empty = no hook
  // Not from YAML: the shim sets "runsc" when gVisor runs the container. runsc runs createContainer
  // hooks in its gofer, where only the device files it passes through exist (hook arg --runsc).
  std::string runtime;
};

// Reads the `gpu:` mapping (missing keys keep defaults). Throws Error(InvalidArgument) naming
// `where` and the key for a wrong type or an unknown mode.
GpuConfig gpu_config_from_yaml(const YAML::Node& gpu, const std::string& where);
// Throws Error(InvalidArgument) for an unknown mode or nvproxy value.
void validate_gpu_config(const GpuConfig& cfg);

}  // namespace nvproxy::gpu
