#include "common/fs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>

#include "common/error.h"

using namespace nvproxy;

TEST(Fs, JoinWithinRefusesEscape) {
  EXPECT_EQ(join_within("/root/b", "x/y").string(), "/root/b/x/y");
  EXPECT_EQ(join_within("/root/b", "/abs/z").string(), "/root/b/abs/z");
  EXPECT_THROW(join_within("/root/b", "../c"), Error);
  EXPECT_THROW(join_within("/root/b", "x/../../c"), Error);
  EXPECT_FALSE(path_within("/root/b", "/root/bc"));
  EXPECT_TRUE(path_within("/root/b/", "/root/b/c"));
}

TEST(Fs, AtomicWriteAndRead) {
  auto dir = std::filesystem::temp_directory_path() / ("nvproxy-fs-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  write_file_atomic(dir / "f", "hello");
  EXPECT_EQ(read_file(dir / "f"), "hello");
  EXPECT_THROW(read_file(dir / "missing"), Error);
  std::filesystem::remove_all(dir);
}

TEST(Fs, ReadFullAtStopsOnlyAtTheEndOfTheFile) {
  auto dir = std::filesystem::temp_directory_path() / ("nvproxy-fs-full-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  write_file_atomic(dir / "f", "0123456789");
  UniqueFd fd(::open((dir / "f").c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(fd);
  char buf[16] = {};
  EXPECT_EQ(read_full_at(fd.get(), buf, 4, 3), 4);
  EXPECT_EQ(std::string(buf, 4), "3456");
  EXPECT_EQ(read_full_at(fd.get(), buf, 16, 6), 4) << "fewer only where the file ends";
  EXPECT_EQ(std::string(buf, 4), "6789");
  EXPECT_EQ(read_full_at(fd.get(), buf, 4, 10), 0);
  EXPECT_EQ(read_full_at(-1, buf, 4, 0), -1);
  std::filesystem::remove_all(dir);
}

namespace {
std::string read_error(const std::filesystem::path& p, std::size_t bound = kMaxReadFileBytes) {
  try {
    read_file(p, bound);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::InvalidArgument) << e.what();
    return e.what();
  }
  return "";
}
}  // namespace

TEST(Fs, ReadFileRefusesWhatIsNotARegularFileAtOnce) {
  auto dir = std::filesystem::temp_directory_path() / ("nvproxy-fs-kind-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
  // A read that waited on the FIFO would never return (ctest's timeout); one of /dev/zero would end
  // at the size bound with another message: the messages say nothing was waited on or read whole.
  EXPECT_EQ(read_error("/dev/zero"), "read /dev/zero: is a character device, not a regular file");
  EXPECT_EQ(read_error(dir / "fifo"), "read " + (dir / "fifo").string() + ": is a FIFO, not a regular file");
  EXPECT_EQ(read_error(dir), "read " + dir.string() + ": is a directory, not a regular file");
  std::filesystem::remove_all(dir);
}

TEST(Fs, ReadFileRefusesAFileOverItsBound) {
  auto dir = std::filesystem::temp_directory_path() / ("nvproxy-fs-bound-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  write_file_atomic(dir / "f", std::string(2000, 'a'));
  EXPECT_EQ(read_file(dir / "f", 2000).size(), 2000u);
  EXPECT_EQ(read_error(dir / "f", 1999), "read " + (dir / "f").string() + ": 2000 bytes exceeds the bound of 1999 bytes");
  // /proc files say 0 bytes: read to their end, and bounded there too.
  EXPECT_FALSE(read_file("/proc/self/status").empty());
  EXPECT_NE(read_error("/proc/self/status", 8).find("exceeds the bound of 8 bytes"), std::string::npos);
  std::filesystem::remove_all(dir);
}
