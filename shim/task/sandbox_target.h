// How the shim reaches the sandbox agent of one runsc container: the runtime binary and its global
// flags (as Create chose them) and the driver library dirs the device layer recorded in the spec.
// One place for the checkpoint session and `diagnose`.
#pragma once

#include <filesystem>
#include <string>

#include "checkpoint/sandbox/sandbox_tools.h"
#include "oci/runtime.h"

namespace nvproxy::shim {

checkpoint::SandboxTarget sandbox_target(const oci::RuntimeConfig& rc, const std::string& id,
                                         const std::filesystem::path& bundle);

}  // namespace nvproxy::shim
