// Building OCI image layouts by hand from files the shim made (containerd's checkpoint index for
// ctr, a checkpoint image for Kubernetes): where a blob lives, and moving a file in under its digest.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "checkpoint/image/image_layout.h"
#include "common/process.h"

namespace nvproxy::checkpoint {

// LAYOUT/blobs/sha256/<hex> of "sha256:<hex>".
std::filesystem::path blob_path(const std::filesystem::path& layout, const std::string& digest);

// Moves `file` into the layout's blobs under its digest; returns its descriptor's digest and size.
LayoutFile add_blob(const std::filesystem::path& file, const std::filesystem::path& layout, ProcessRunner& runner);

// Writes `text` as a blob of the layout; returns its descriptor's digest and size.
LayoutFile add_blob_text(const std::string& text, const std::filesystem::path& layout, ProcessRunner& runner);

// The layout's index.json, naming the one manifest or index `descriptor` (mediaType, digest, size,
// annotations), and its oci-layout file.
void write_layout_top(const std::filesystem::path& layout, const nlohmann::json& descriptor);

// tar with `argv` (bounded at 10 minutes); its standard output (a listing). Error naming `what`
// with tar's own error.
std::string run_tar(std::vector<std::string> argv, ProcessRunner& runner, const std::string& what);

}  // namespace nvproxy::checkpoint
