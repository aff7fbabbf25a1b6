// The runtime settings a container was created with, kept in its bundle so that `delete` (run by
// containerd after the shim died, with no options) drives the same runtime binary and root.
#pragma once

#include <filesystem>

#include "oci/runtime.h"

namespace nvproxy::shim {

inline constexpr const char* kRuntimeRecordFile = "nvproxy-runtime.json";

void write_runtime_record(const std::filesystem::path& bundle, const oci::RuntimeConfig& rc);
// Missing or unreadable record: nullopt (the caller falls back to the config).
std::optional<oci::RuntimeConfig> read_runtime_record(const std::filesystem::path& bundle);

}  // namespace nvproxy::shim
