#include "cgroup/files.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

using namespace nvproxy::cgroup;

// memory.events of a container whose cgroup went away, as the OOM watch and the host memory probe
// read it: empty, not an exception they do not know (it ended the shim's OOM watch thread).
TEST(CgroupFiles, KeyValueFileThatIsGoneReadsAsEmpty) {
  const auto dir = std::filesystem::temp_directory_path() / ("nvproxy-kv-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  { std::ofstream(dir / "memory.events") << "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n"; }
  EXPECT_EQ(read_cgroup_kv(dir / "memory.events").at("oom_kill"), 1u);
  std::filesystem::remove_all(dir);
  EXPECT_TRUE(read_cgroup_kv(dir / "memory.events").empty());
}
