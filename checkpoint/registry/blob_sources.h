// Which repositories of a registry already hold a checkpoint's blobs, as this node knows it: the
// repository each earlier pull came from (its store entry names it) and the one each push went to
// (the store keeps the latest push's manifest per repository). A push to another repository of
// the same registry has such blobs mounted (the distribution API's cross-repository mount: the
// registry links the blob it holds, no bytes move) instead of uploading them again: the replicas
// of one model pushed each to its own repository, a server restored from one repository and
// checkpointed into another. What the node knows may be stale (the registry collected the blob,
// the credentials may not read that repository): a mount that fails is an upload, as before.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <unordered_map>

#include "checkpoint/image/image_layout.h"

namespace nvproxy::checkpoint {

// Where pulls of `repo` ("host/repo") land in `store`: STORE/registry/<repo as one name>.
std::filesystem::path registry_repo_dir(const std::filesystem::path& store, const std::string& repo);

// The repository a pulled entry came from, written beside its manifest.
inline constexpr const char* kSourceFile = ".repository";

class BlobSources {
 public:
  // What `store` knows of the registry `repo` is on, `repo` itself left out (its own blobs are
  // found by asking it). An entry or record that cannot be read is passed over: it only costs an
  // upload.
  static BlobSources in_store(const std::filesystem::path& store, const std::string& repo);
  // `m`'s blobs are in `repo` (the first repository named for a blob is kept).
  void add(const std::string& repo, const ArtifactManifest& m);
  // A repository holding `blob_digest`, or null.
  [[nodiscard]] const std::string* find(const std::string& blob_digest) const;
  [[nodiscard]] std::size_t size() const { return where_.size(); }

 private:
  std::unordered_map<std::string, std::string> where_;  // blob digest -> repository
};

// What a push into `repo` made: its manifest, and the largest chunk it was cut at with the
// size configured then.
struct PushRecord {
  std::string manifest_text;
  std::uint64_t configured_chunk_bytes = 0, chunk_bytes = 0;
};

// Keeps `rec`, just pushed to `repo`, as the store's record of what that repository holds (the
// previous record of it replaced). Never throws: a push that landed is not failed by its record.
void record_push(const std::filesystem::path& store, const std::string& repo, const PushRecord& rec) noexcept;

// The largest chunk the last push into `repo` was cut at, where it was cut at more than
// `configured` with `configured` the size set then (the manifest's budget raised it); else 0.
std::uint64_t raised_chunk_bytes(const std::filesystem::path& store, const std::string& repo, std::uint64_t configured) noexcept;

}  // namespace nvproxy::checkpoint
