#include "shim/node/config_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "common/fs.h"
#include "common/scratch_dir.h"

namespace nvproxy::node {
namespace {

namespace fs = std::filesystem;

fs::path scratch_path() {
  return fs::temp_directory_path() / ("node-config-file-" + std::to_string(::getpid()));
}

TEST(ConfigFile, AbsentIsNulloptAndADirectoryIsRefused) {
  ScratchDir dir(scratch_path());
  EXPECT_FALSE(read_config_text(dir.path() / "none.toml"));
  EXPECT_THROW(read_config_text(dir.path()), Error);
}

TEST(ConfigFile, OriginalKeptBesideItNeverOverwritten) {
  ScratchDir dir(scratch_path());
  const fs::path f = dir.path() / "config.toml";
  write_file_atomic(f, "one\n", 0600);
  EXPECT_EQ(replace_config(f, "two\n"), fs::path(f.string() + ".nvproxy-orig"));
  EXPECT_EQ(replace_config(f, "three\n"), fs::path(f.string() + ".nvproxy-orig.2"));
  EXPECT_EQ(read_file(f.string() + ".nvproxy-orig"), "one\n");
  EXPECT_EQ(read_file(f.string() + ".nvproxy-orig.2"), "two\n");
  EXPECT_EQ(read_file(f), "three\n");
  struct stat st {};
  ASSERT_EQ(::stat(f.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u) << "the file's mode is kept";
}

TEST(ConfigFile, NewFileInANewDirectoryHasNoBackup) {
  ScratchDir dir(scratch_path());
  const fs::path f = dir.path() / "conf.d" / "nvproxy.toml";
  EXPECT_TRUE(replace_config(f, "x = 1\n").empty());
  EXPECT_EQ(read_file(f), "x = 1\n");
}

TEST(ConfigFile, ASymbolicLinkIsWrittenThrough) {
  ScratchDir dir(scratch_path());
  const fs::path target = dir.path() / "managed.toml", link = dir.path() / "config.toml";
  write_file_atomic(target, "old\n");
  fs::create_symlink(target, link);
  replace_config(link, "new\n");
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(read_file(target), "new\n");
}

}  // namespace
}  // namespace nvproxy::node
