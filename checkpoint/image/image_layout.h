// A checkpoint image as an OCI artifact, the form in which it travels through a registry: one
// manifest whose layers are the image's files as they are (CRIU's pages-N.img, runsc's
// checkpoint.img...), each named by its path in an `org.opencontainers.image.title` annotation, and
// whose config and annotation carry the image's record (nvproxy-cuda.json), so that a node reads
// what the image needs before it pulls the bulk.
//
// On disk it is an OCI image layout (what skopeo reads and writes): the blobs are hard links to the
// image's files, so laying an image out takes no second copy; turning a pulled layout back into an
// image moves the blobs into place.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/image/image_record.h"
#include "common/process.h"

namespace nvproxy::checkpoint {

inline constexpr const char* kArtifactType = "application/vnd.nvproxy.checkpoint.v1";
inline constexpr const char* kRecordMediaType = "application/vnd.nvproxy.checkpoint.record.v1+json";
inline constexpr const char* kFileMediaType = "application/vnd.nvproxy.checkpoint.file.v1";
inline constexpr const char* kRecordAnnotation = "io.nvproxy.checkpoint.record";
inline constexpr const char* kLayoutTag = "nvproxy";  // the one image of a layout this code writes

struct LayoutFile {
  std::string path;    // relative to the image directory
  std::string digest;  // "sha256:<64 hex>"
  std::uint64_t size = 0;
};

struct ArtifactManifest {
  std::vector<LayoutFile> files;
  std::optional<ImageRecord> record;  // absent: an image without one (no CUDA, or not the shim's)
};

// "sha256:<hex>" of each file, by `sha256sum` (bounded: a minute plus a second per 200 MB). Throws
// Error naming the file.
std::vector<LayoutFile> digest_files(const std::filesystem::path& image_dir, ProcessRunner& runner);

// Lays `image_dir` out as an OCI layout in `layout_dir` (created; on the same filesystem, or the
// blobs are copied) and returns the manifest's JSON text, byte for byte what is pushed.
std::string write_layout(const std::filesystem::path& image_dir, const std::filesystem::path& layout_dir, ProcessRunner& runner);

// The manifest's files and record; Error(InvalidArgument) naming what is wrong for anything that is
// not such an artifact (another artifact type, a title that leaves the image, a bad digest).
ArtifactManifest parse_artifact_manifest(const nlohmann::json& manifest);

// Moves the blobs of a pulled layout into `image_dir` under their titles, after checking that each
// is there with its size (the digests were checked while they streamed). Error(DataLoss) naming
// the file that is missing or cut short.
void image_from_layout(const std::filesystem::path& layout_dir, const ArtifactManifest& m,
                       const std::filesystem::path& image_dir);

}  // namespace nvproxy::checkpoint
