// Finding driver libraries and tools under a driver root for legacy discovery.
#pragma once

#include <string>
#include <vector>

#include "gpu/container_edits.h"

namespace nvproxy::gpu {

// Library dirs searched under the driver root, in order (Debian/Ubuntu, RHEL, the GPU operator's
// /usr/local/nvidia, then plain lib dirs).
const std::vector<std::string>& driver_lib_dirs();
const std::vector<std::string>& driver_bin_dirs();

// Adds one read-only bind per real file of library `stem` ("libcuda" matches libcuda.so.<x>), at
// its real path, plus a SymlinkEdit for each host link that points at it (libcuda.so.1 ->
// libcuda.so.580.0). With several versions present the one matching `driver_version` wins, else the
// highest (with a warning). Returns false when nothing matched.
bool add_driver_library(const std::string& driver_root, const std::string& stem, const std::string& driver_version,
                        ContainerEdits& edits, std::vector<std::string>& warnings);

// Adds a bind of the real file of tool `name` found in a bin dir (first hit), plus a SymlinkEdit if
// the tool's path is a link. Returns false when not found.
bool add_driver_tool(const std::string& driver_root, const std::string& name, ContainerEdits& edits);

// The read-only bind options every driver file gets; "bind", never "rbind".
const std::vector<std::string>& driver_mount_options();

}  // namespace nvproxy::gpu
