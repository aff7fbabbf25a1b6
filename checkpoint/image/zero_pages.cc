#include "checkpoint/image/zero_pages.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/parallel.h"
#include "common/unique_fd.h"

namespace nvproxy::checkpoint {

namespace {

constexpr std::size_t kPage = 4096;

bool zero_page(const unsigned char* p) {
  // Most pages of data differ from zero in their first word: one cache line read decides them.
  std::uint64_t first;
  std::memcpy(&first, p, sizeof first);
  return first == 0 && std::memcmp(p, p + 8, kPage - 8) == 0;
}

// A page file opened once; its windows are scanned by several threads.
struct PageFile {
  std::filesystem::path path;
  UniqueFd fd;
};

// A window of a page file's data, whole pages only.
struct Window {
  std::shared_ptr<PageFile> file;
  off_t off = 0;
  std::size_t len = 0;
};

// The file's data extents (SEEK_DATA/SEEK_HOLE: holes already there are skipped), cut into windows.
void windows_of(const std::shared_ptr<PageFile>& f, std::size_t window, std::vector<Window>& out) {
  const off_t size = ::lseek(f->fd.get(), 0, SEEK_END);
  if (size < 0) throw sys_error("size of page file " + f->path.string());
  const off_t pages_end = size - size % static_cast<off_t>(kPage);  // a tail shorter than a page stays
  for (off_t pos = 0; pos < pages_end;) {
    off_t data = ::lseek(f->fd.get(), pos, SEEK_DATA);
    if (data < 0) {
      if (errno == ENXIO) break;  // only a hole is left
      throw sys_error("seek in page file " + f->path.string());
    }
    const off_t page = static_cast<off_t>(kPage);
    data -= data % page;
    off_t hole = ::lseek(f->fd.get(), data, SEEK_HOLE);
    if (hole < 0) throw sys_error("seek in page file " + f->path.string());
    hole = std::min(pages_end, (hole + page - 1) / page * page);
    for (off_t at = data; at < hole; at += static_cast<off_t>(window))
      out.push_back({f, at, static_cast<std::size_t>(std::min<off_t>(static_cast<off_t>(window), hole - at))});
    pos = std::max(hole, pos + static_cast<off_t>(kPage));
  }
}

struct Totals {
  std::atomic<std::uint64_t> scanned{0}, punched{0};
  std::atomic<bool> not_supported{false};
  std::mutex mu;
  std::string error;  // the first failure; the other windows still finish
};

// Scans one window through a read-only mapping (no copy), then punches its zero runs.
void scan_window(const Window& w, Totals& t) {
  void* m = ::mmap(nullptr, w.len, PROT_READ, MAP_SHARED, w.file->fd.get(), w.off);
  if (m == MAP_FAILED) throw sys_error("map page file " + w.file->path.string() + " at " + std::to_string(w.off));
  ::madvise(m, w.len, MADV_SEQUENTIAL);
  std::vector<std::pair<off_t, off_t>> runs;  // [start, end) of zero pages
  const auto* p = static_cast<const unsigned char*>(m);
  off_t run = -1;
  for (std::size_t i = 0; i < w.len; i += kPage) {
    const off_t at = w.off + static_cast<off_t>(i);
    if (zero_page(p + i)) {
      if (run < 0) run = at;
    } else if (run >= 0) {
      runs.emplace_back(run, at);
      run = -1;
    }
  }
  if (run >= 0) runs.emplace_back(run, w.off + static_cast<off_t>(w.len));
  ::munmap(m, w.len);
  t.scanned += w.len;
  for (const auto& [from, to] : runs) {
    if (t.not_supported) return;
    if (::fallocate(w.file->fd.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, from, to - from) == 0) {
      t.punched += static_cast<std::uint64_t>(to - from);
    } else if (errno == EOPNOTSUPP || errno == ENOSYS) {
      t.not_supported = true;
    } else {
      throw sys_error("punch a hole of " + std::to_string(to - from) + " bytes at " + std::to_string(from) + " into " +
                      w.file->path.string());
    }
  }
}

}  // namespace

bool is_criu_page_file(const std::filesystem::path& p) {
  const std::string name = p.filename().string();
  return name.starts_with("pages-") && name.ends_with(".img");
}

ZeroPunch punch_zero_pages(const std::filesystem::path& image_dir, const ZeroPunchOptions& opts) {
  ZeroPunch out;
  std::vector<Window> windows;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(image_dir, ec)) {
    if (!e.is_regular_file(ec) || !is_criu_page_file(e.path())) continue;
    auto f = std::make_shared<PageFile>(PageFile{e.path(), UniqueFd(::open(e.path().c_str(), O_RDWR | O_CLOEXEC))});
    if (!f->fd) throw sys_error("open page file " + e.path().string());
    ++out.files;
    windows_of(f, std::max<std::size_t>(kPage, opts.window_bytes - opts.window_bytes % kPage), windows);
  }
  if (ec) throw Error(Code::Internal, "list the image " + image_dir.string() + ": " + ec.message());
  Totals t;
  unsigned threads = opts.threads ? opts.threads : std::clamp(std::thread::hardware_concurrency(), 1u, 8u);
  for_each_parallel(windows, threads, [&](const Window& w) {
    try {
      scan_window(w, t);
    } catch (const std::exception& e) {
      std::lock_guard lk(t.mu);
      if (t.error.empty()) t.error = e.what();
    }
  });
  if (!t.error.empty()) throw Error(Code::Internal, t.error);
  out.scanned = t.scanned;
  out.punched = t.punched;
  if (t.not_supported) out.not_supported = "fallocate(PUNCH_HOLE) is not supported on " + image_dir.string();
  return out;
}

}  // namespace nvproxy::checkpoint
