#include "common/fs.h"

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

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
