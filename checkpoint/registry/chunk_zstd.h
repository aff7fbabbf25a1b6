// A chunk through a registry compressed with zstd (checkpoint.registry_compression: zstd), both
// ways streamed: a chunk is never held whole in memory (chunks may be a GiB, eight move at once).
//
// Why per chunk and only where it pays: CRIU's pages of a CPU-heavy heap shrink about 3.6x at
// level 1 (bench/zstd_pages.sh), staged device memory and other random pages not at all. A push
// compresses each chunk once to learn its compressed digest and size (what the manifest names);
// a chunk that does not shrink by a tenth travels as it is, so GPU pages cost no decompression on
// the pull. zstd's output is fixed for given input, level and library, so the same chunk pushed
// again has the same compressed digest and a registry that holds it is not sent it again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace nvproxy::checkpoint {

inline constexpr int kZstdLevel = 1;  // ~330 MB/s a thread in, over a GB/s out (bench/README)

// The compressed form of bytes [offset, offset + size) of `fd`, produced as it is read: a put_blob
// Reader. The same bytes however they are asked for (one frame per MiB of the range, each made in
// one call). Error naming `what` when the file ends early or cannot be read.
class ZstdChunkReader {
 public:
  ZstdChunkReader(int fd, std::uint64_t offset, std::uint64_t size, std::string what, int level = kZstdLevel);
  ~ZstdChunkReader();
  ZstdChunkReader(const ZstdChunkReader&) = delete;
  ZstdChunkReader& operator=(const ZstdChunkReader&) = delete;
  // Up to n compressed bytes into buf; 0 only at the end. `at` is where in the compressed stream:
  // in order, or 0 to start again (an upload sent again).
  std::size_t read(std::uint64_t at, char* buf, std::size_t n);
  [[nodiscard]] std::uint64_t consumed() const { return consumed_; }  // of the file's bytes

 private:
  void restart();
  void next_frame();
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int fd_;
  std::uint64_t offset_, size_;
  std::string what_;
  int level_;
  std::uint64_t consumed_ = 0, produced_ = 0;
};

struct ZstdPacked {
  std::string digest;  // "sha256:<hex>" of the compressed bytes
  std::uint64_t size = 0;
};

// Compresses the range once, for its digest and size.
ZstdPacked zstd_measure(int fd, std::uint64_t offset, std::uint64_t size, const std::string& what);

// Decompresses one chunk's compressed bytes (its frames in order) as they arrive, handing out what
// they decode to with its place in the chunk. Error(DataLoss) naming `what` for bytes that are no
// zstd frame, frames that decode past `size` bytes, or (finish) ones that stopped inside a frame or
// decoded to fewer.
class ZstdChunkWriter {
 public:
  using Out = std::function<void(std::uint64_t at, const char* data, std::size_t n)>;
  ZstdChunkWriter(std::uint64_t size, std::string what, Out out);
  ~ZstdChunkWriter();
  ZstdChunkWriter(const ZstdChunkWriter&) = delete;
  ZstdChunkWriter& operator=(const ZstdChunkWriter&) = delete;
  void write(const char* data, std::size_t n);
  void finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::uint64_t size_, produced_ = 0;
  std::string what_;
  Out out_;
  bool ended_ = false;
};

}  // namespace nvproxy::checkpoint
