// A checkpoint image as an OCI artifact, the form in which it travels through a registry: one
// manifest whose layers are the image's files (CRIU's pages-N.img, runsc's checkpoint.img...),
// each named by its path in an `org.opencontainers.image.title` annotation, a large file as several
// layers, its chunks (chunk_plan.h), each with its offset in the file; the config and an
// annotation carry the image's record (nvproxy-cuda.json), so that a node reads what the image
// needs before it pulls the bulk. An image of 0.6.0 (one layer per file, no offsets) is read as
// files of one chunk each.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/image/image_record.h"
#include "common/process.h"

namespace nvproxy::checkpoint {

inline constexpr const char* kArtifactType = "application/vnd.nvproxy.checkpoint.v1";
// An image with compressed chunks: a reader of v1 would take their bytes for the file's, so it
// must refuse the image by its type (this code reads both).
inline constexpr const char* kArtifactTypeCompressed = "application/vnd.nvproxy.checkpoint.v2";
inline constexpr const char* kRecordMediaType = "application/vnd.nvproxy.checkpoint.record.v1+json";
inline constexpr const char* kFileMediaType = "application/vnd.nvproxy.checkpoint.file.v1";
inline constexpr const char* kFileZstdMediaType = "application/vnd.nvproxy.checkpoint.file.v1+zstd";
inline constexpr const char* kRecordAnnotation = "io.nvproxy.checkpoint.record";
inline constexpr const char* kOffsetAnnotation = "io.nvproxy.checkpoint.offset";  // a chunk's place in its file
// A compressed chunk's own bytes (what lands in the file): the layer's digest and size are the
// compressed blob's.
inline constexpr const char* kContentDigestAnnotation = "io.nvproxy.checkpoint.content.digest";
inline constexpr const char* kContentSizeAnnotation = "io.nvproxy.checkpoint.content.size";
inline constexpr const char* kLayoutTag = "nvproxy";  // the one image of a layout this code writes

struct LayoutFile {
  std::string path;    // relative to the image directory
  std::string digest;  // "sha256:<64 hex>" of these bytes, as they are in the file
  std::uint64_t size = 0;
  std::uint64_t offset = 0;  // where these bytes are in the file (a chunk of it)
  // Compressed with zstd (chunk_zstd.h): the blob's digest and size; empty: the blob is the bytes.
  std::string zstd_digest;
  std::uint64_t zstd_size = 0;
  [[nodiscard]] const std::string& blob_digest() const { return zstd_digest.empty() ? digest : zstd_digest; }
  [[nodiscard]] std::uint64_t blob_size() const { return zstd_digest.empty() ? size : zstd_size; }
};

struct ArtifactManifest {
  std::vector<LayoutFile> files;      // chunks, in file order; a file's chunks tile it from offset 0
  std::optional<ImageRecord> record;  // absent: an image without one (no CUDA, or not the shim's)
};

// "sha256:<hex>" of each file, by `sha256sum` (bounded: a minute plus a second per 200 MB). Throws
// Error naming the file.
std::vector<LayoutFile> digest_files(const std::filesystem::path& image_dir, ProcessRunner& runner);

// The manifest's JSON text for `chunks` (in file order) and the record's JSON text, whose blob is
// the config. A file of one chunk carries no offset (as 0.6.0 wrote it); a compressed chunk's
// layer is its blob, with its own digest and size in annotations, and the image is then of
// kArtifactTypeCompressed.
std::string artifact_manifest_text(const std::vector<LayoutFile>& chunks, const std::string& record_text);

// The manifest's files and record; Error(InvalidArgument) naming what is wrong for anything that is
// not such an artifact (another artifact type, a title that leaves the image, a bad digest, chunks
// of a file that do not tile it, a layer of another media type or a compressed one without its
// own digest and size).
ArtifactManifest parse_artifact_manifest(const nlohmann::json& manifest);

// Each file's size: the end of its last chunk.
std::map<std::string, std::uint64_t> file_sizes(const ArtifactManifest& m);

}  // namespace nvproxy::checkpoint
