// The record of what the device layer gave a container, kept in config.json's annotations so that
// checkpoint/restore (and our hook) know the devices, nodes and mounts without redoing discovery.
//
// annotations["nvproxy.containerd.io/gpu"] = JSON string:
//   {"version":1, "mode":"cdi"|"legacy"|"cdi+legacy", "devices":[names],
//    "request":{"visibleAll":bool,"visible":[...],"cdi":[...],"capabilities":[...]},
//    "nodes":[{"path","hostPath","type","major","minor"}], "mounts":[{"source","destination"}],
//    "symlinks":[{"path","target"}], "ldDirs":[container dirs holding injected libraries],
//    "hook":"gpu-setup" (absent when no hook was added)}
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "gpu/container_edits.h"
#include "gpu/device_request.h"

namespace nvproxy::gpu {

inline constexpr const char* kRecordAnnotation = "nvproxy.containerd.io/gpu";
inline constexpr const char* kHookName = "gpu-setup";  // args: [hook_binary, "hook", "gpu-setup"]

nlohmann::json make_record(const std::string& mode, const std::vector<std::string>& devices, const GpuRequest& req,
                           const ContainerEdits& edits, bool with_hook);

// The record in spec's annotations, or nullopt when there is none. Throws Error(InvalidArgument)
// naming the annotation when it is not valid JSON.
std::optional<nlohmann::json> read_record(const nlohmann::json& spec);
// Same from an annotations object (the OCI state carries annotations without the rest of the spec).
std::optional<nlohmann::json> read_record_annotations(const nlohmann::json& annotations);

// The request stored in a record, so a second apply resolves exactly what the first one did even
// though CDI env edits (NVIDIA_VISIBLE_DEVICES=void) changed the env in between.
GpuRequest request_from_record(const nlohmann::json& record);

}  // namespace nvproxy::gpu
