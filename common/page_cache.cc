#include "common/page_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>

#include "common/unique_fd.h"

namespace nvproxy {

namespace {
// cachestat(2): the same number on every architecture (the unified syscall table); Debian 12's
// headers predate it.
#ifdef __NR_cachestat
constexpr long kCachestat = __NR_cachestat;
#else
constexpr long kCachestat = 451;
#endif
// Its arguments, as <linux/mman.h> of Linux 6.5 declares them.
struct CachestatRange {
  std::uint64_t off = 0, len = 0;  // len 0: to the end of the file
};
struct Cachestat {
  std::uint64_t nr_cache = 0, nr_dirty = 0, nr_writeback = 0, nr_evicted = 0, nr_recently_evicted = 0;
};
}  // namespace

std::optional<double> page_cache_share(const std::filesystem::path& file) {
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  struct stat st {};
  if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  if (st.st_size == 0) return 1.0;
  CachestatRange range;
  Cachestat cs;
  if (::syscall(kCachestat, fd.get(), &range, &cs, 0) != 0) return std::nullopt;
  const double page = static_cast<double>(::sysconf(_SC_PAGESIZE));
  const double share = static_cast<double>(cs.nr_cache) * page / static_cast<double>(st.st_size);
  return share > 1.0 ? 1.0 : share;
}

}  // namespace nvproxy
