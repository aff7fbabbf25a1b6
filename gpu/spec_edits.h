// Applying ContainerEdits to an OCI runtime spec (config.json as JSON), idempotently: an edit that
// is already there (ours from an earlier apply, or containerd CRI's own CDI injection) is
// recognised by its target (env key, device path, mount destination, hook path+args) and not added
// again.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpu/container_edits.h"

namespace nvproxy::gpu {

// Returns how many edits were newly added. Device nodes need type/major/minor filled
// (fill_host_info). Existing entries that target the same thing with other content are kept and
// reported in `warnings`, except env, which CDI semantics override. Throws Error(InvalidArgument)
// naming the config.json field when the spec has a wrong shape there.
size_t apply_edits(nlohmann::json& spec, const ContainerEdits& edits, std::vector<std::string>& warnings);

}  // namespace nvproxy::gpu
