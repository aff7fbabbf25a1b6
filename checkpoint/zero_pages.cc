#include "checkpoint/zero_pages.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "common/error.h"
#include "common/unique_fd.h"

namespace nvproxy::checkpoint {

namespace {

constexpr std::size_t kPage = 4096;
constexpr std::size_t kChunk = 8u << 20;  // read 8 MiB at a time

bool zero_page(const unsigned char* p) {
  // A page is zero when its first word is and every byte equals the one 8 bytes before it.
  std::uint64_t first;
  std::memcpy(&first, p, sizeof first);
  return first == 0 && std::memcmp(p, p + 8, kPage - 8) == 0;
}

// Turns [off, off + len) into a hole; false when the filesystem cannot.
bool punch(int fd, off_t off, off_t len, const std::filesystem::path& file) {
  if (::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, len) == 0) return true;
  if (errno == EOPNOTSUPP || errno == ENOSYS) return false;
  throw sys_error("punch a hole of " + std::to_string(len) + " bytes at " + std::to_string(off) + " into " + file.string());
}

// One page file: reads its data (SEEK_DATA skips holes already there), punches its zero runs.
void punch_file(const std::filesystem::path& file, ZeroPunch& out) {
  UniqueFd fd(::open(file.c_str(), O_RDWR | O_CLOEXEC));
  if (!fd) throw sys_error("open page file " + file.string());
  const off_t size = ::lseek(fd.get(), 0, SEEK_END);
  if (size < 0) throw sys_error("size of page file " + file.string());
  ++out.files;
  std::vector<unsigned char> buf(kChunk);
  off_t run_start = -1;  // the zero run being collected
  auto flush = [&](off_t end) {
    if (run_start < 0) return true;
    const off_t len = end - run_start;
    run_start = -1;
    if (!punch(fd.get(), end - len, len, file)) return false;
    out.punched += static_cast<std::uint64_t>(len);
    return true;
  };
  off_t pos = 0;
  while (pos < size) {
    off_t data = ::lseek(fd.get(), pos, SEEK_DATA);
    if (data < 0) {
      if (errno == ENXIO) break;  // only a hole is left
      throw sys_error("seek in page file " + file.string());
    }
    if (data != pos && !flush(pos)) {
      out.not_supported = "fallocate(PUNCH_HOLE) is not supported on " + file.parent_path().string();
      return;
    }
    pos = data;
    const std::size_t want = static_cast<std::size_t>(std::min<off_t>(static_cast<off_t>(kChunk), size - pos));
    ssize_t n = ::pread(fd.get(), buf.data(), want, pos);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw sys_error("read page file " + file.string() + " at " + std::to_string(pos));
    out.scanned += static_cast<std::uint64_t>(n);
    // Whole pages only: a tail shorter than a page stays as it is.
    const std::size_t pages = static_cast<std::size_t>(n) / kPage;
    for (std::size_t i = 0; i < pages; ++i) {
      const off_t at = pos + static_cast<off_t>(i * kPage);
      if (zero_page(buf.data() + i * kPage)) {
        if (run_start < 0) run_start = at;
      } else if (!flush(at)) {
        out.not_supported = "fallocate(PUNCH_HOLE) is not supported on " + file.parent_path().string();
        return;
      }
    }
    const off_t consumed = static_cast<off_t>(pages * kPage);
    if (consumed == 0) break;  // the short tail
    pos += consumed;
  }
  if (!flush(pos)) out.not_supported = "fallocate(PUNCH_HOLE) is not supported on " + file.parent_path().string();
}

}  // namespace

bool is_criu_page_file(const std::filesystem::path& p) {
  const std::string name = p.filename().string();
  return name.starts_with("pages-") && name.ends_with(".img");
}

ZeroPunch punch_zero_pages(const std::filesystem::path& image_dir) {
  ZeroPunch out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(image_dir, ec)) {
    if (!e.is_regular_file(ec) || !is_criu_page_file(e.path())) continue;
    punch_file(e.path(), out);
    if (!out.not_supported.empty()) break;
  }
  if (ec) throw Error(Code::Internal, "list the image " + image_dir.string() + ": " + ec.message());
  return out;
}

}  // namespace nvproxy::checkpoint
