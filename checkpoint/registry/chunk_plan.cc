#include "checkpoint/registry/chunk_plan.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "checkpoint/image/sha256.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/unique_fd.h"

namespace nvproxy::checkpoint {

namespace {

namespace fs = std::filesystem;

constexpr std::uint64_t kPage = 4096;
constexpr std::size_t kBufferBytes = std::size_t{8} << 20;  // per reader: large reads, bounded memory
constexpr std::uint64_t kMul = 0x9e3779b97f4a7c15ull;       // odd: multiplying by it is a bijection
constexpr std::uint64_t kMul2 = 0xd6e8feb86659fd93ull;

// Whether a chunk may end after this page: a fast (not cryptographic) hash of its 64-bit words
// matches `mask`. Four independent lanes keep the multiplier busy; the final mix makes the low bits,
// which the mask tests, depend on every word. The zero page never may (chunk_plan.h says why).
bool cut_candidate(const unsigned char* page, std::uint64_t mask) {
  std::uint64_t lane[4] = {kMul, kMul2, kMul ^ kMul2, kMul + kMul2};
  std::uint64_t any = 0;
  for (std::size_t i = 0; i < kPage; i += 4 * sizeof(std::uint64_t)) {
    for (int l = 0; l < 4; ++l) {
      std::uint64_t w;
      std::memcpy(&w, page + i + l * sizeof w, sizeof w);
      any |= w;
      lane[l] = std::rotl((lane[l] ^ w) * kMul, 29);
    }
  }
  if (any == 0) return false;
  std::uint64_t h = lane[0];
  for (int l = 1; l < 4; ++l) h = std::rotl((h ^ lane[l]) * kMul2, 31);
  h ^= h >> 32;
  h *= kMul;
  h ^= h >> 29;
  h *= kMul2;
  h ^= h >> 32;
  return (h & mask) == 0;
}

// The cut rule's sizes in bytes (chunk_plan.h).
struct Rule {
  std::uint64_t max = 0;    // whole pages
  std::uint64_t min = 0;    // whole pages
  std::uint64_t limit = 0;  // what no chunk exceeds, the last page's tail included
  std::uint64_t mask = 0;
};

Rule rule_of(const ChunkOptions& o) {
  Rule r;
  r.max = std::max(kPage, o.max_bytes - o.max_bytes % kPage);
  const std::uint64_t min = std::max(kPage, o.max_bytes / 16);
  r.min = min - min % kPage;
  r.limit = std::max(kPage, o.max_bytes);
  r.mask = std::bit_floor(std::max<std::uint64_t>(1, o.max_bytes / 4 / kPage)) - 1;
  return r;
}

struct File {
  fs::path path;
  std::string rel;
  std::uint64_t size = 0;
  std::vector<std::uint8_t> cut;  // per whole page, cut_candidate (1 byte, not the hash: 5 MB for 20 GiB)
};

std::vector<File> list_files(const fs::path& dir) {
  std::vector<File> files;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, ec);
  for (const fs::recursive_directory_iterator end; !ec && it != end; it.increment(ec)) {
    const fs::file_status st = it->symlink_status(ec);
    if (ec) break;
    if (fs::is_directory(st)) continue;
    if (!fs::is_regular_file(st))
      throw Error(Code::InvalidArgument,
                  it->path().string() + " is neither a regular file nor a directory; it cannot be chunked");
    const std::uint64_t size = it->file_size(ec);
    if (ec) break;
    files.push_back({it->path(), it->path().lexically_relative(dir).generic_string(), size, {}});
  }
  if (ec) throw sys_error("list the image " + dir.string(), ec.value());
  std::sort(files.begin(), files.end(), [](const File& a, const File& b) { return a.rel < b.rel; });
  return files;
}

UniqueFd open_file(const File& f) {
  UniqueFd fd(::open(f.path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) throw sys_error("open " + f.path.string());
  return fd;
}

// Exactly n bytes at `off`; Error(DataLoss) naming the file where it ends first (it shrank).
void read_at(int fd, const File& f, unsigned char* buf, std::size_t n, std::uint64_t off) {
  const long r = read_full_at(fd, reinterpret_cast<char*>(buf), n, off);
  if (r < 0) throw sys_error("read " + f.path.string() + " at " + std::to_string(off));
  if (static_cast<std::size_t>(r) < n)
    throw Error(Code::DataLoss, f.path.string() + " ended at " + std::to_string(off + static_cast<std::uint64_t>(r)) +
                                    " while it was read; it had " + std::to_string(f.size) + " bytes");
}

// work(buffer, i) for every i < n on up to `threads` threads, each reading into its own buffer of
// kBufferBytes. After the first exception no new item starts; it is rethrown once all are joined.
template <class Fn>
void run_readers(std::size_t n, int threads, Fn&& work) {
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  std::exception_ptr first;
  auto reader = [&] {
    try {
      const auto buf = std::make_unique_for_overwrite<unsigned char[]>(kBufferBytes);
      for (std::size_t i; !failed && (i = next.fetch_add(1)) < n;) work(buf.get(), i);
    } catch (...) {
      const std::lock_guard lk(mu);
      if (!first) first = std::current_exception();
      failed = true;
    }
  };
  const std::size_t readers = std::min<std::size_t>(static_cast<std::size_t>(std::max(threads, 1)), n);
  std::vector<std::thread> pool;
  for (std::size_t r = 1; r < readers; ++r) {
    try {
      pool.emplace_back(reader);
    } catch (const std::system_error&) {
      break;  // no thread to be had: fewer readers do the work
    }
  }
  if (readers > 0) reader();
  for (auto& t : pool) t.join();
  if (first) std::rethrow_exception(first);
}

// Phase 1: every page's cut_candidate, in windows of a buffer read in parallel. Files too small for
// any cut (shorter than min) are not read.
void mark_candidates(std::vector<File>& files, const Rule& r, int threads) {
  struct Window {
    File* file;
    std::uint64_t first_page;
    std::uint64_t pages;
  };
  std::vector<Window> windows;
  constexpr std::uint64_t kWindowPages = kBufferBytes / kPage;
  for (File& f : files) {
    const std::uint64_t pages = f.size / kPage;
    if (pages * kPage < r.min) continue;
    f.cut.resize(pages);
    for (std::uint64_t p = 0; p < pages; p += kWindowPages) windows.push_back({&f, p, std::min(kWindowPages, pages - p)});
  }
  run_readers(windows.size(), threads, [&](unsigned char* buf, std::size_t i) {
    const Window& w = windows[i];
    const UniqueFd fd = open_file(*w.file);
    read_at(fd.get(), *w.file, buf, w.pages * kPage, w.first_page * kPage);
    for (std::uint64_t p = 0; p < w.pages; ++p) w.file->cut[w.first_page + p] = cut_candidate(buf + p * kPage, r.mask) ? 1 : 0;
  });
}

// Phase 2: a file's chunks from its candidates, in order.
void cut_file(const File& f, const Rule& r, std::vector<FileChunk>& out) {
  const std::size_t first = out.size();
  const std::uint64_t whole = f.size - f.size % kPage;
  std::uint64_t start = 0;
  auto emit = [&](std::uint64_t end) {
    out.push_back({f.rel, start, end - start, {}});
    start = end;
  };
  for (std::uint64_t end = kPage; end <= whole; end += kPage) {
    const std::uint64_t len = end - start;
    if (len >= r.max || (len >= r.min && f.cut[end / kPage - 1] != 0)) emit(end);
  }
  if (start < f.size) {
    if (start == whole && out.size() > first && out.back().size + (f.size - whole) <= r.limit)
      out.back().size = f.size - out.back().offset;  // only the last partial page is left
    else
      emit(f.size);
  } else if (out.size() == first) {
    emit(0);  // an empty file
  }
}

// Phase 3: each chunk's sha256, the largest first so that no reader is left with a large one at the end.
void digest_chunks(std::vector<FileChunk>& chunks, const std::vector<const File*>& file_of, int threads) {
  std::vector<std::size_t> order(chunks.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return chunks[a].size > chunks[b].size; });
  run_readers(order.size(), threads, [&](unsigned char* buf, std::size_t i) {
    FileChunk& c = chunks[order[i]];
    const File& f = *file_of[order[i]];
    Sha256 h;
    if (c.size > 0) {
      const UniqueFd fd = open_file(f);
      for (std::uint64_t done = 0; done < c.size;) {
        const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(kBufferBytes, c.size - done));
        read_at(fd.get(), f, buf, n, c.offset + done);
        h.update(buf, n);
        done += n;
      }
    }
    c.digest = h.finish();
  });
}

}  // namespace

std::uint64_t expected_chunk_bytes(const ChunkOptions& opts) {
  const Rule r = rule_of(opts);
  return std::min(r.max, r.min + (r.mask + 1) * kPage);
}

std::vector<FileChunk> plan_chunks(const std::filesystem::path& image_dir, const ChunkOptions& opts) {
  const Rule r = rule_of(opts);
  std::vector<File> files = list_files(image_dir);
  mark_candidates(files, r, opts.threads);
  std::vector<FileChunk> chunks;
  std::vector<const File*> file_of;
  for (const File& f : files) {
    cut_file(f, r, chunks);
    file_of.resize(chunks.size(), &f);
  }
  digest_chunks(chunks, file_of, opts.threads);
  return chunks;
}

}  // namespace nvproxy::checkpoint
