#include "common/page_cache.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "common/scratch_dir.h"

namespace nvproxy {
namespace {

// A file just written is in the cache; once written back and dropped (POSIX_FADV_DONTNEED), it
// is not. A missing file or a directory: nullopt. On /var/tmp: a tmpfs /tmp keeps its pages.
TEST(PageCache, ShareOfAFileWrittenThenDropped) {
  ScratchDir dir("/var/tmp/nvproxy-page-cache-test-" + std::to_string(::getpid()));
  auto file = dir.path() / "pages.img";
  std::ofstream(file) << std::string(8 << 20, 'x');
  auto warm = page_cache_share(file);
  if (!warm) GTEST_SKIP() << "this kernel has no cachestat(2)";
  EXPECT_GT(*warm, 0.9);
  int fd = ::open(file.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::fdatasync(fd), 0);
  ASSERT_EQ(::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
  ::close(fd);
  auto cold = page_cache_share(file);
  ASSERT_TRUE(cold);
  EXPECT_LT(*cold, 0.1);
  EXPECT_FALSE(page_cache_share(dir.path() / "missing"));
  EXPECT_FALSE(page_cache_share(dir.path()));
}

}  // namespace
}  // namespace nvproxy
