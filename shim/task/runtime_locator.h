// Which runtime (binary, --root, flags) drives a container: the one place Create, `delete` and
// `diagnose` learn it. Create decides it (config file, runtime options, namespace) and keeps it in
// the bundle, so that `delete` (run by containerd after the shim died, with no options) and
// `diagnose` (run by an operator) drive the same runtime binary and root.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "oci/runtime.h"

namespace nvproxy::shim {

inline constexpr const char* kRuntimeRecordFile = "nvproxy-runtime.json";

void write_runtime_record(const std::filesystem::path& bundle, const oci::RuntimeConfig& rc);
// Missing or unreadable record: nullopt.
std::optional<oci::RuntimeConfig> read_runtime_record(const std::filesystem::path& bundle);

// Create's choice: the configured runtime with the runtime options' overrides, its root made
// per-namespace (as containerd's runc shim keeps /run/containerd/runc/NS).
oci::RuntimeConfig runtime_for_namespace(oci::RuntimeConfig configured, const std::string& ns);
// For a container that exists: the record in its bundle, else what Create would choose from the
// default configuration.
oci::RuntimeConfig locate_runtime(const std::filesystem::path& bundle, const std::string& ns);
// The bundle containerd gives a task of this namespace and id (runtime v2's state directory).
std::filesystem::path default_bundle(const std::string& ns, const std::string& id);

}  // namespace nvproxy::shim
