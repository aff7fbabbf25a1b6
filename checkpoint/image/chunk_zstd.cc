#include "checkpoint/image/chunk_zstd.h"

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

struct ZstdChunkReader::Impl {
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  std::vector<char> in = std::vector<char>(kInPiece);
  ZSTD_inBuffer pending{nullptr, 0, 0};
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
  check(ZSTD_CCtx_reset(impl_->cctx, ZSTD_reset_session_and_parameters), Code::Internal, what_);
  check(ZSTD_CCtx_setParameter(impl_->cctx, ZSTD_c_compressionLevel, level_), Code::Internal, what_);
  // The frame names its size: a pull checks it against the manifest's before writing.
  check(ZSTD_CCtx_setPledgedSrcSize(impl_->cctx, size_), Code::Internal, what_);
  impl_->pending = {impl_->in.data(), 0, 0};
  consumed_ = produced_ = 0;
  ended_ = false;
}

std::size_t ZstdChunkReader::read(std::uint64_t at, char* buf, std::size_t n) {
  if (at == 0 && produced_ != 0) restart();
  if (at != produced_)
    throw Error(Code::Internal, what_ + ": the compressed chunk was asked for at " + std::to_string(at) + ", not at " +
                                    std::to_string(produced_));
  ZSTD_outBuffer out{buf, n, 0};
  while (out.pos < out.size && !ended_) {
    ZSTD_inBuffer& in = impl_->pending;
    if (in.pos == in.size && consumed_ < size_) {
      const long got = read_at(fd_, impl_->in.data(), std::min<std::uint64_t>(kInPiece, size_ - consumed_), offset_ + consumed_);
      if (got < 0) throw sys_error(what_ + ": reading at " + std::to_string(offset_ + consumed_));
      if (got == 0)
        throw Error(Code::DataLoss, what_ + ": the file ended at " + std::to_string(offset_ + consumed_) + ", inside the chunk");
      in = {impl_->in.data(), static_cast<std::size_t>(got), 0};
      consumed_ += static_cast<std::uint64_t>(got);
    }
    const ZSTD_EndDirective mode = consumed_ == size_ ? ZSTD_e_end : ZSTD_e_continue;
    const std::size_t left = ZSTD_compressStream2(impl_->cctx, &out, &in, mode);
    check(left, Code::Internal, what_);
    if (mode == ZSTD_e_end && left == 0) ended_ = true;
  }
  produced_ += out.pos;
  return out.pos;
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
    if (ended_) throw Error(Code::DataLoss, what_ + ": bytes after the end of the compressed chunk");
    ZSTD_outBuffer out{impl_->out.data(), impl_->out.size(), 0};
    const std::size_t r = ZSTD_decompressStream(impl_->dctx, &out, &in);
    check(r, Code::DataLoss, what_);
    full = out.pos == out.size;
    if (out.pos > size_ - produced_)
      throw Error(Code::DataLoss, what_ + ": the compressed chunk decodes to more than its " + std::to_string(size_) + " bytes");
    if (out.pos > 0) out_(produced_, impl_->out.data(), out.pos);
    produced_ += out.pos;
    if (r == 0) {
      ended_ = true;
      if (in.pos < in.size) throw Error(Code::DataLoss, what_ + ": bytes after the end of the compressed chunk");
      break;
    }
  }
}

void ZstdChunkWriter::finish() {
  if (!ended_ || produced_ != size_)
    throw Error(Code::DataLoss, what_ + ": the compressed chunk decoded to " + std::to_string(produced_) + " of its " +
                                    std::to_string(size_) + " bytes" + (ended_ ? "" : " and did not end"));
}

}  // namespace nvproxy::checkpoint
