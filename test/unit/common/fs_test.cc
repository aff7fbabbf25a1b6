#include "common/fs.h"

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
