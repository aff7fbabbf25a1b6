#include "checkpoint/registry/chunk_zstd.h"

#include <zstd.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "checkpoint/image/sha256.h"
#include "common/error.h"
#include "common/fs.h"

namespace nvproxy::checkpoint {

namespace {

constexpr std::size_t kInPiece = std::size_t{1} << 20;

void check(std::size_t r, Code code, const std::string& what) {
  if (ZSTD_isError(r) != 0U) throw Error(code, what + ": zstd: " + ZSTD_getErrorName(r));
}

}  // namespace

// The compressed form is one zstd frame per kInPiece of the range, each made in one call into a
// buffer that always has room: a pure function of those bytes, the level and the library. The
// streaming API is not: how much room each call's output had changes which path compresses the
// last input and so the bytes (a push's two compressions of one chunk differed on the GPU
// machine, and the registry refused the upload: DIGEST_INVALID). Frames of 1 MiB cost nothing at
// level 1, whose window is half that.
struct ZstdChunkReader::Impl {
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  std::vector<char> in = std::vector<char>(kInPiece);
  std::vector<char> frame = std::vector<char>(ZSTD_compressBound(kInPiece));
  std::size_t frame_len = 0, frame_pos = 0;
  bool any_frame = false;
  ~Impl() { ZSTD_freeCCtx(cctx); }
  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
};

ZstdChunkReader::ZstdChunkReader(int fd, std::uint64_t offset, std::uint64_t size, std::string what, int level)
    : impl_(std::make_unique<Impl>()), fd_(fd), offset_(offset), size_(size), what_(std::move(what)), level_(level) {
  if (impl_->cctx == nullptr) throw Error(Code::ResourceExhausted, what_ + ": no zstd context");
  restart();
}

ZstdChunkReader::~ZstdChunkReader() = default;

void ZstdChunkReader::restart() {
  impl_->frame_len = impl_->frame_pos = 0;
  impl_->any_frame = false;
  consumed_ = produced_ = 0;
}

// The next piece of the range (up to kInPiece) compressed into impl_->frame; an empty range is one
// empty frame.
void ZstdChunkReader::next_frame() {
  const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(kInPiece, size_ - consumed_));
  const long got = read_full_at(fd_, impl_->in.data(), want, offset_ + consumed_);
  if (got < 0) throw sys_error(what_ + ": reading at " + std::to_string(offset_ + consumed_));
  if (static_cast<std::size_t>(got) < want)
    throw Error(Code::DataLoss, what_ + ": the file ended at " +
                                    std::to_string(offset_ + consumed_ + static_cast<std::uint64_t>(got)) + ", inside the chunk");
  const std::size_t len =
      ZSTD_compressCCtx(impl_->cctx, impl_->frame.data(), impl_->frame.size(), impl_->in.data(), want, level_);
  check(len, Code::Internal, what_);
  impl_->frame_len = len;
  impl_->frame_pos = 0;
  impl_->any_frame = true;
  consumed_ += want;
}

std::size_t ZstdChunkReader::read(std::uint64_t at, char* buf, std::size_t n) {
  if (at == 0 && produced_ != 0) restart();
  if (at != produced_)
    throw Error(Code::Internal, what_ + ": the compressed chunk was asked for at " + std::to_string(at) + ", not at " +
                                    std::to_string(produced_));
  std::size_t filled = 0;
  while (filled < n) {
    if (impl_->frame_pos == impl_->frame_len) {
      if (consumed_ == size_ && impl_->any_frame) break;
      next_frame();
    }
    const std::size_t k = std::min(n - filled, impl_->frame_len - impl_->frame_pos);
    std::copy_n(impl_->frame.data() + impl_->frame_pos, k, buf + filled);
    impl_->frame_pos += k;
    filled += k;
  }
  produced_ += filled;
  return filled;
}

ZstdPacked zstd_measure(int fd, std::uint64_t offset, std::uint64_t size, const std::string& what) {
  ZstdChunkReader r(fd, offset, size, what);
  Sha256 sum;
  std::vector<char> buf(kInPiece);
  ZstdPacked out;
  for (std::size_t n; (n = r.read(out.size, buf.data(), buf.size())) > 0;) {
    sum.update(buf.data(), n);
    out.size += n;
  }
  out.digest = sum.finish();
  return out;
}

struct ZstdChunkWriter::Impl {
  ZSTD_DCtx* dctx = ZSTD_createDCtx();
  std::vector<char> out = std::vector<char>(ZSTD_DStreamOutSize() * 8);
  ~Impl() { ZSTD_freeDCtx(dctx); }
  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
};

ZstdChunkWriter::ZstdChunkWriter(std::uint64_t size, std::string what, Out out)
    : impl_(std::make_unique<Impl>()), size_(size), what_(std::move(what)), out_(std::move(out)) {
  if (impl_->dctx == nullptr) throw Error(Code::ResourceExhausted, what_ + ": no zstd context");
}

ZstdChunkWriter::~ZstdChunkWriter() = default;

void ZstdChunkWriter::write(const char* data, std::size_t n) {
  ZSTD_inBuffer in{data, n, 0};
  // Until the input is used and the last call left room in the output (none held back).
  for (bool full = true; in.pos < in.size || full;) {
    ZSTD_outBuffer out{impl_->out.data(), impl_->out.size(), 0};
    const std::size_t r = ZSTD_decompressStream(impl_->dctx, &out, &in);
    check(r, Code::DataLoss, what_);
    full = out.pos == out.size;
    if (out.pos > size_ - produced_)
      throw Error(Code::DataLoss, what_ + ": the compressed chunk decodes to more than its " + std::to_string(size_) + " bytes");
    if (out.pos > 0) out_(produced_, impl_->out.data(), out.pos);
    produced_ += out.pos;
    // A frame ended; what follows is the next frame of the chunk (one per MiB of it).
    ended_ = r == 0;
    if (ended_ && in.pos == in.size) break;
  }
}

void ZstdChunkWriter::finish() {
  if (!ended_ || produced_ != size_)
    throw Error(Code::DataLoss, what_ + ": the compressed chunk decoded to " + std::to_string(produced_) + " of its " +
                                    std::to_string(size_) + " bytes" + (ended_ ? "" : " and its last frame did not end"));
}

}  // namespace nvproxy::checkpoint
