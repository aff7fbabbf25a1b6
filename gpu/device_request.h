// What a container asks for, read from config.json the way NVIDIA Container Toolkit users write it:
// env NVIDIA_VISIBLE_DEVICES / NVIDIA_DRIVER_CAPABILITIES and CDI annotations.
#pragma once

#include <cstddef>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace nvproxy::gpu {

struct GpuRequest {
  bool requested = false;              // some GPU device is asked for
  bool visible_all = false;            // NVIDIA_VISIBLE_DEVICES=all
  std::vector<std::string> visible;    // indices and GPU-/MIG- UUIDs from NVIDIA_VISIBLE_DEVICES
  std::vector<std::string> cdi_names;  // fully-qualified CDI names (annotations and the env)
  std::set<std::string> capabilities;  // driver capabilities (compute, utility, ...)
  std::vector<std::string> warnings;
};

// Capabilities we know; "all" in the env means these.
const std::set<std::string>& known_capabilities();

// How much of a request the shim reads (docs/configuration.md, "Bounds on what a container asks").
// A pod author writes these values, so a request beyond a bound is refused with InvalidArgument
// naming the field, its size and the bound before any work in proportion to it is done; within the
// bounds parsing is linear (duplicates are found through a hash set).
struct RequestLimits {
  std::size_t max_value_bytes = 64 * 1024;  // NVIDIA_VISIBLE_DEVICES, NVIDIA_DRIVER_CAPABILITIES, each CDI annotation
  std::size_t max_cdi_annotations = 1024;   // CDI annotations in one spec
  std::size_t max_devices = 4096;           // distinct devices asked for (indices, UUIDs, CDI names)
};

// Throws Error(InvalidArgument) naming the env variable or annotation key that is malformed.
// NVIDIA_VISIBLE_DEVICES unset, "void", "none" or empty: no GPU from the env (annotations may still
// request CDI devices).
GpuRequest parse_request(const nlohmann::json& spec, const RequestLimits& limits = {});

// The value of KEY in process.env (the last one wins, as in execve), or nullopt.
std::optional<std::string> env_value(const nlohmann::json& spec, const std::string& key);

// Is this annotation key a CDI device request ("cdi.k8s.io/<x>" or "<vendor>.cdi.k8s.io/<x>")?
bool is_cdi_annotation(const std::string& key);

}  // namespace nvproxy::gpu
