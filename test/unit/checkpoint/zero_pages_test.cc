// The zero-page pass over CRIU's page files (checkpoint/image/zero_pages.h) on real files: the bytes read
// back are the same, zero pages become holes, other files of the image are left alone.
#include "checkpoint/image/zero_pages.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "common/fs.h"
#include "fake_gpu.h"

using namespace nvproxy;
using namespace nvproxy::checkpoint;
using namespace nvproxy::checkpoint::testing;

namespace {

constexpr std::size_t kPage = 4096;

std::string page(char c) {
  return std::string(kPage, c);
}

// Bytes that occupy disk blocks (st_blocks counts 512-byte units).
long long allocated(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::stat(p.c_str(), &st), 0);
  return static_cast<long long>(st.st_blocks) * 512;
}

}  // namespace

TEST(ZeroPages, ZeroPagesBecomeHolesAndTheBytesStayTheSame) {
  fs::path dir = make_temp_dir();
  // data, 3 zero pages, data with a zero byte run inside, 2 zero pages, then a zero tail shorter
  // than a page (kept as it is).
  std::string data = page('a') + std::string(3 * kPage, '\0') + std::string(100, 'b') + std::string(kPage - 100, '\0') +
                     std::string(2 * kPage, '\0') + std::string(100, '\0');
  spit(dir / "pages-1.img", data);
  std::string other = std::string(4 * kPage, '\0');
  spit(dir / "core-1.img", other);
  const long long before = allocated(dir / "pages-1.img");

  ZeroPunch z = punch_zero_pages(dir);
  ASSERT_EQ(z.not_supported, "");
  EXPECT_EQ(z.files, 1);
  EXPECT_EQ(z.punched, 5 * kPage) << "pages 1-3 and 5-6; page 4 holds data, the tail is not a page";
  EXPECT_EQ(slurp(dir / "pages-1.img"), data) << "a restore must read the very same bytes";
  EXPECT_LE(allocated(dir / "pages-1.img"), before - static_cast<long long>(5 * kPage));
  EXPECT_EQ(slurp(dir / "core-1.img"), other);
  EXPECT_GE(allocated(dir / "core-1.img"), static_cast<long long>(4 * kPage)) << "only page files are touched";

  // Again (an image punched twice): the bytes still the same, no block comes back.
  const long long punched_once = allocated(dir / "pages-1.img");
  ASSERT_EQ(punch_zero_pages(dir).not_supported, "");
  EXPECT_EQ(slurp(dir / "pages-1.img"), data);
  EXPECT_LE(allocated(dir / "pages-1.img"), punched_once);
  fs::remove_all(dir);
}

TEST(ZeroPages, AFileOfDataAloneIsLeftWhole) {
  fs::path dir = make_temp_dir();
  std::string data;
  for (int i = 0; i < 64; ++i) data += page(static_cast<char>('A' + i % 26));
  spit(dir / "pages-7.img", data);
  ZeroPunch z = punch_zero_pages(dir);
  EXPECT_EQ(z.punched, 0u);
  EXPECT_EQ(z.scanned, data.size());
  EXPECT_EQ(slurp(dir / "pages-7.img"), data);
  EXPECT_THROW(punch_zero_pages(dir / "missing"), Error);
  fs::remove_all(dir);
}

// Windows smaller than the file, on several threads: zero runs that cross a window's edge, holes
// already in the file and a tail shorter than a page come out as one pass over the whole file would.
TEST(ZeroPages, WindowsOnSeveralThreadsPunchWhatOnePassWould) {
  fs::path dir = make_temp_dir();
  std::string data;
  std::uint64_t zeros = 0;
  for (int i = 0; i < 256; ++i) {
    bool zero = (i % 7 == 3) || (i >= 60 && i < 90) || i == 255;
    data += zero ? std::string(kPage, '\0') : page(static_cast<char>('a' + i % 26));
    zeros += zero ? kPage : 0;
  }
  data += std::string(10, '\0');
  spit(dir / "pages-2.img", data);
  spit(dir / "pages-3.img", data);
  ZeroPunch z = punch_zero_pages(dir, {.window_bytes = 5 * kPage, .threads = 4});
  ASSERT_EQ(z.not_supported, "");
  EXPECT_EQ(z.files, 2);
  EXPECT_EQ(z.punched, 2 * zeros);
  EXPECT_EQ(slurp(dir / "pages-2.img"), data);
  EXPECT_EQ(slurp(dir / "pages-3.img"), data);
  // Again: the holes are skipped, only data is read.
  ZeroPunch again = punch_zero_pages(dir, {.window_bytes = 3 * kPage, .threads = 3});
  EXPECT_EQ(again.punched, 0u);
  EXPECT_LE(again.scanned, 2 * (256 * kPage - zeros)) << "holes are not read again";
  EXPECT_EQ(slurp(dir / "pages-2.img"), data);
  fs::remove_all(dir);
}
