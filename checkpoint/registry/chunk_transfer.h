// The bulk of a checkpoint image through a registry as chunks (chunk_plan.h), several streams at
// once (one thread each).
//
// push: the chunks the repository does not hold yet are mounted from another repository of the
// registry known to hold them (blob_sources.h) or uploaded straight from their ranges of the
// image's files (a second push of an unchanged server sends almost nothing), then the manifest.
// With zstd on, each chunk that shrinks by a tenth travels compressed, compressed as it is
// uploaded and decompressed into place as it is pulled (chunk_zstd.h).
// pull: each file is made at its full size and each chunk written in place (no assembly copy),
// its digest checked as it streams; runs of zeros are not written (the file keeps them as
// holes, as CRIU left them out). A chunk some earlier pull already brought to this node is copied
// from there instead of fetched. A journal in the directory lists the chunks that are whole, so
// a pull that stopped (killed, the registry gone, a deadline) resumes with the rest (each listed
// chunk's digest checked again in place); the caller makes the directory an image only once every
// chunk is whole. Nothing is synced chunk by chunk: the caller marks the image with the boot it
// was pulled in, and an image of an earlier boot is verified before it is used (verify_pulled).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/image/image_layout.h"
#include "checkpoint/registry/blob_sources.h"
#include "checkpoint/registry/image_registry.h"
#include "checkpoint/registry/transfer_progress.h"

namespace nvproxy::checkpoint {

struct TransferOptions {
  int streams = 16;                         // chunks moving at once
  int attempts = 3;                         // per chunk
  std::uint64_t chunk_bytes = 16ull << 20;  // the largest chunk
  bool zstd = false;                        // push: chunks compressed where that pays (chunk_zstd.h)
  // Registries built on Distribution refuse a manifest over 4 MiB (after every blob went up): an
  // image that would need a larger one is cut into larger chunks (doubled until it fits).
  std::size_t manifest_budget = std::size_t{3} << 20;
  // The largest chunk the last push into the same repository was cut at, where the budget raised
  // it above chunk_bytes (0: none): kept while the image is within 2x of needing it, so that an
  // image near a doubling is cut the same way each time instead of being sent whole again.
  std::uint64_t last_chunk_bytes = 0;
  TransferProgress::Sink progress;  // null: no reports
  bool terminal = false;
  std::string boot_id;  // the boot a pulled entry is marked with; empty: this host's (/proc)
};

struct ChunkPush {
  std::string digest;                              // the manifest's
  std::string manifest;                            // its text
  std::uint64_t bytes = 0, sent = 0, skipped = 0;  // of the image's own bytes
  std::uint64_t mounted = 0;                       // of `skipped`: mounted from other repositories
  std::uint64_t wire = 0;                          // what was uploaded (compressed where it was)
  std::uint64_t chunk_bytes = 0;                   // the largest chunk (above opts' for a huge image)
  int files = 0, chunks = 0;
  std::string summary;  // TransferProgress::finish's line
};

ChunkPush push_chunked(const std::filesystem::path& image_dir, const std::string& reference, ImageRegistry& registry,
                       const TransferOptions& opts, const BlobSources& sources = {});

// The largest chunk a push of `files` files of `bytes` in all starts from: opts.chunk_bytes,
// doubled while the manifest such an image is expected to need (a layer entry per
// expected_chunk_bytes, chunk_plan.h) would pass opts.manifest_budget; opts.last_chunk_bytes
// where that is larger and an image of twice `bytes` would need it. Cutting is a read of the
// whole image, so a large one is cut once at a size that fits; the push still checks the
// manifest it made.
std::uint64_t starting_chunk_bytes(std::uint64_t bytes, std::uint64_t files, const TransferOptions& opts);

// Where earlier pulls left chunks: entry directories each holding its manifest (kManifestFile).
inline constexpr const char* kManifestFile = ".manifest.json";

struct ChunkPull {
  std::uint64_t fetched = 0, reused = 0, resumed = 0;  // of the image's own bytes
  std::uint64_t wire = 0;                              // what was downloaded (compressed where it was)
  std::string summary;
};

// Pulls the chunks of `m` (from `repo`) into `dir`. Error: the first chunk that failed all its
// attempts; what is whole stays listed in the journal for the next try.
ChunkPull pull_chunked(const std::string& repo, const ArtifactManifest& m, const std::filesystem::path& dir,
                       const std::vector<std::filesystem::path>& earlier, ImageRegistry& registry, const TransferOptions& opts);

// Whether every chunk of a pulled entry (its kManifestFile) still has its digest, `threads`
// readers at once: false where a file is missing, of another size or holds other bytes.
bool verify_pulled(const std::filesystem::path& entry, int threads);

}  // namespace nvproxy::checkpoint
