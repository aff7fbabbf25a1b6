// Cutting a checkpoint image's files into chunks, each its own blob in a registry, so that a
// pages-N.img of many GiB travels as several blobs pushed and pulled at once, and a checkpoint
// taken after a small change shares most blobs with the one before it.
//
// Why cuts are chosen per page, by content: CRIU's page files hold whole 4 KiB pages, so device
// memory mapped in or dropped between two checkpoints shifts the rest of the file by whole pages.
// Fixed-size chunks would all change after such a shift; a cut placed after a page whose own hash
// matches a pattern moves with the data, so the chunking resyncs at the first such page after the
// change, and the chunks from there on keep their digests. Hashing whole pages (not a rolling
// window over bytes) is also far cheaper, which matters at disk speed over 20 GiB files.
//
// The rule, for a file cut into pages of 4096 bytes:
//   max    = max_bytes rounded down to a page multiple, at least one page;
//   min    = max(4096, max_bytes / 16) rounded down to a page multiple;
//   mask   = (largest power of two <= (max_bytes / 4) / 4096) - 1: the average chunk is about
//            min + max_bytes / 4;
//   a chunk ends after page p when it holds >= min bytes and (hash(p) & mask) == 0, or when it
//   holds max bytes. The all-zero page is never such a p: CRIU's files hold long runs of zero
//   pages, which would otherwise cut into min-sized chunks; a zero run is cut only at max.
// A file's last partial page goes with its last chunk (on its own only where that chunk would
// grow past max_bytes). An empty file is one chunk of size 0; a file smaller than min is one chunk.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace nvproxy::checkpoint {

struct ChunkOptions {
  std::uint64_t max_bytes = 1ull << 30;  // no chunk is larger (a max_bytes below a page counts as a page)
  int threads = 4;                       // readers hashing at once (below 1: one)
};

struct FileChunk {
  std::string path;          // relative to the image directory
  std::uint64_t offset = 0;  // in the file
  std::uint64_t size = 0;
  std::string digest;  // "sha256:<hex>" of these bytes
};

// Every regular file below image_dir (sorted by relative path; anything else than a regular file or a
// directory: Error(InvalidArgument) naming it), cut into content-defined chunks, in file order.
// Each file is read twice (page hashes, then each chunk's sha256), by opts.threads readers.
// Error naming the file for a file that cannot be read or that shrinks while it is read.
std::vector<FileChunk> plan_chunks(const std::filesystem::path& image_dir, const ChunkOptions& opts);

// The size the rule's chunks average over pages of random content: min plus the mean run to a
// cut page (mask + 1 pages), at most max. Zero runs and files smaller than a chunk differ.
std::uint64_t expected_chunk_bytes(const ChunkOptions& opts);

}  // namespace nvproxy::checkpoint
