// A small OCI image layout (a Kubernetes checkpoint image, containerd's checkpoint archive as an
// artifact) to and from a registry, blob by blob through ImageRegistry. The bulk of a checkpoint,
// its memory, travels in chunks instead (chunk_transfer.h).
#pragma once

#include <filesystem>
#include <string>

#include "checkpoint/registry/image_registry.h"

namespace nvproxy::checkpoint {

// Pushes the layout's one manifest (index.json's) with its config and layers to `reference`;
// blobs the repository holds already are not sent. Returns the manifest's digest.
std::string push_layout(const std::filesystem::path& layout, const std::string& reference, ImageRegistry& registry);

// Pulls `reference`'s manifest, config and layers into `layout`, index.json naming it as `tag`.
void pull_layout(const std::string& reference, const std::filesystem::path& layout, const std::string& tag,
                 ImageRegistry& registry);

}  // namespace nvproxy::checkpoint
