#include "checkpoint/process/zero_count.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/shared/proc_maps.h"
#include "common/error.h"
#include "common/parallel.h"
#include "common/unique_fd.h"

namespace nvproxy::checkpoint {

namespace {

constexpr std::uint64_t kPage = 4096;
constexpr std::uint64_t kPresent = 1ULL << 63;
constexpr std::uint64_t kPfnMask = (1ULL << 55) - 1;
constexpr std::uint64_t kWindowPages = 1024;  // 4 MiB of memory, 8 KiB of pagemap per window

struct Range {
  std::uint64_t start = 0, end = 0;
};

// Private anonymous mappings that can be read: "7f..-7f.. rw-p 00000000 00:00 0  [heap]".
std::vector<Range> private_anonymous(const std::filesystem::path& maps) {
  auto entries = read_maps(maps);
  if (!entries) throw sys_error("cannot read " + maps.string());
  std::vector<Range> out;
  for (const MapsEntry& m : *entries) {
    if (m.perms.size() < 4 || m.perms[0] != 'r' || m.perms[3] != 'p' || m.inode != 0) continue;
    // The kernel's own mappings hold nothing a pool could be.
    if (!m.path.empty() && m.path != "[heap]" && m.path != "[stack]" && m.path.rfind("[anon:", 0) != 0) continue;
    out.push_back({m.start, m.end});
  }
  return out;
}

// The page frame of the kernel's zero page, as our own pagemap shows it; 0: frames are hidden.
std::uint64_t zero_page_frame(const std::filesystem::path& proc) {
  void* p = ::mmap(nullptr, kPage, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw sys_error("mmap for the zero page's frame");
  volatile const char* c = static_cast<const char*>(p);
  (void)*c;  // a read fault maps the zero page
  std::uint64_t entry = 0;
  UniqueFd fd(::open((proc / "self/pagemap").c_str(), O_RDONLY | O_CLOEXEC));
  bool ok = fd && ::pread(fd.get(), &entry, sizeof entry,
                          static_cast<off_t>(reinterpret_cast<std::uintptr_t>(p) / kPage * sizeof entry)) ==
                      static_cast<ssize_t>(sizeof entry);
  ::munmap(p, kPage);
  if (!ok) throw sys_error("cannot read " + (proc / "self/pagemap").string());
  return (entry & kPresent) ? entry & kPfnMask : 0;
}

bool all_zero(const unsigned char* p) {
  std::uint64_t first;
  std::memcpy(&first, p, sizeof first);
  return first == 0 && std::memcmp(p, p + 8, kPage - 8) == 0;
}

}  // namespace

ZeroCount count_zero_pages(pid_t pid, const ZeroCountOptions& opts) {
  const std::filesystem::path dir = opts.proc / std::to_string(pid);
  const std::uint64_t zero_frame = zero_page_frame(opts.proc);
  if (zero_frame == 0)
    throw Error(Code::PermissionDenied,
                "zero pages of pid " + std::to_string(pid) + ": the pagemap shows no page frames (needs CAP_SYS_ADMIN)");
  std::vector<Range> windows;
  for (const Range& r : private_anonymous(dir / "maps"))
    for (std::uint64_t a = r.start; a < r.end; a += kWindowPages * kPage)
      windows.push_back({a, std::min(r.end, a + kWindowPages * kPage)});
  UniqueFd pagemap(::open((dir / "pagemap").c_str(), O_RDONLY | O_CLOEXEC));
  UniqueFd mem(::open((dir / "mem").c_str(), O_RDONLY | O_CLOEXEC));
  if (!pagemap || !mem) throw sys_error("zero pages of pid " + std::to_string(pid) + ": cannot open its pagemap or mem");

  std::atomic<std::uint64_t> present{0}, zero{0};
  std::atomic<bool> complete{true};
  const auto until = std::chrono::steady_clock::now() + opts.time_limit;
  std::mutex mu;
  std::string error;
  unsigned threads = opts.threads ? opts.threads : std::clamp(std::thread::hardware_concurrency(), 1U, 8U);
  for_each_parallel(windows, threads, [&](const Range& w) {
    if (std::chrono::steady_clock::now() >= until) {
      complete = false;
      return;
    }
    const std::uint64_t pages = (w.end - w.start) / kPage;
    std::vector<std::uint64_t> entries(pages);
    std::vector<unsigned char> buf(pages * kPage);
    const auto want = static_cast<ssize_t>(pages * sizeof(std::uint64_t));
    if (::pread(pagemap.get(), entries.data(), static_cast<size_t>(want), static_cast<off_t>(w.start / kPage * 8)) != want) {
      std::lock_guard lk(mu);
      error = "cannot read " + (dir / "pagemap").string() + ": " + std::strerror(errno);
      return;
    }
    // Runs of present pages, each read with one call.
    std::uint64_t here = 0, zeros = 0;
    auto counted = [&](std::uint64_t i) { return (entries[i] & kPresent) && (entries[i] & kPfnMask) != zero_frame; };
    for (std::uint64_t i = 0; i < pages;) {
      if (!counted(i)) {
        ++i;
        continue;
      }
      std::uint64_t j = i;
      while (j < pages && counted(j)) ++j;
      const auto len = static_cast<ssize_t>((j - i) * kPage);
      here += j - i;
      // A run that cannot be read (unmapped meanwhile: the process should be stopped) counts as data.
      if (::pread(mem.get(), buf.data(), static_cast<size_t>(len), static_cast<off_t>(w.start + i * kPage)) == len)
        for (std::uint64_t k = 0; k < j - i; ++k) zeros += all_zero(buf.data() + k * kPage) ? 1 : 0;
      i = j;
    }
    present += here * kPage;
    zero += zeros * kPage;
  });
  if (!error.empty()) throw Error(Code::Internal, "zero pages of pid " + std::to_string(pid) + ": " + error);
  return {.present = present.load(), .zero = zero.load(), .complete = complete.load()};
}

}  // namespace nvproxy::checkpoint
