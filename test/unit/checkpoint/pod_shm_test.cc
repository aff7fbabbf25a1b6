// The pod's /dev/shm in the checkpoint image (pod_shm.h): which mount it is, the script CRIU runs
// at post-dump (run here as CRIU would, with its environment), the restore that keeps what is there.
#include "checkpoint/image/pod_shm.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "common/fs.h"

namespace nvproxy::checkpoint {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class PodShmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::remove_all(root_);
    fs::create_directories(root_ / "shm-a");
    fs::create_directories(root_ / "image");
    fs::create_directories(root_ / "shm-b");
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_ = fs::temp_directory_path() / ("nvproxy-podshm-" + std::to_string(::getpid()));
  DirectWaiter waiter_;
  ProcessRunner runner_{waiter_};
};

TEST_F(PodShmTest, OnlyADirectoryBoundAtDevShmIsThePods) {
  const std::string dir = (root_ / "shm-a").string();
  auto spec = [](json mounts) { return json{{"mounts", std::move(mounts)}}; };
  EXPECT_EQ(
      pod_shm_source(spec({{{"destination", "/dev/shm"}, {"type", "bind"}, {"source", dir}, {"options", {"rbind", "rw"}}}})),
      fs::path(dir));
  EXPECT_EQ(pod_shm_source(spec({{{"destination", "/dev/shm"}, {"source", dir}, {"options", {"rbind"}}}})), fs::path(dir));
  EXPECT_FALSE(pod_shm_source(spec({{{"destination", "/dev/shm"}, {"type", "tmpfs"}, {"source", "shm"}}})))
      << "the container's own tmpfs: CRIU dumps it";
  EXPECT_FALSE(pod_shm_source(spec({{{"destination", "/dev/shm"}, {"type", "bind"}, {"source", (root_ / "none").string()}}})));
  EXPECT_FALSE(pod_shm_source(spec({{{"destination", "/data"}, {"type", "bind"}, {"source", dir}}})));
  EXPECT_FALSE(pod_shm_source(json::object()));
}

// CRIU runs the script at every action; only post-dump writes, into the image directory CRIU names.
TEST_F(PodShmTest, TheScriptSavesTheDirectoryAtPostDumpAndTheRestoreKeepsWhatIsThere) {
  write_file_atomic(root_ / "shm-a" / "sem.mp-1", std::string(32, 's'));
  write_file_atomic(root_ / "shm-a" / "link_remap.56", std::string(32, 'r'));
  const fs::path script = root_ / "post-dump.sh";
  write_file_atomic(script, pod_shm_script(root_ / "shm-a", find_program("tar")), 0700);
  for (const char* action : {"pre-dump", "network-lock", "post-dump", "network-unlock"}) {
    RunResult r = runner_.run(
        Command{.argv = {script.string()},
                .env_add = {std::string("CRTOOLS_SCRIPT_ACTION=") + action, "CRTOOLS_IMAGE_DIR=" + (root_ / "image").string()}});
    ASSERT_TRUE(r.ok()) << action << ": " << r.describe();
    EXPECT_EQ(fs::exists(root_ / "image" / kPodShmFile),
              std::string(action) != "pre-dump" && std::string(action) != "network-lock")
        << action;
  }
  write_file_atomic(root_ / "shm-b" / "sem.mp-1", "the new pod's own");
  ASSERT_TRUE(restore_pod_shm(root_ / "image", root_ / "shm-b", runner_));
  EXPECT_EQ(read_file(root_ / "shm-b" / "link_remap.56"), std::string(32, 'r')) << "CRIU's link remap, for the restore";
  EXPECT_EQ(read_file(root_ / "shm-b" / "sem.mp-1"), "the new pod's own") << "what the pod has is kept";
  EXPECT_FALSE(restore_pod_shm(root_ / "shm-a", root_ / "shm-b", runner_)) << "an image without the file";
}

TEST_F(PodShmTest, AnEmptyDirectoryWritesNothingAndAFullOneIsCounted) {
  EXPECT_EQ(save_pod_shm(root_ / "shm-a", root_ / "image", runner_), 0u);
  EXPECT_FALSE(fs::exists(root_ / "image" / kPodShmFile));
  write_file_atomic(root_ / "shm-a" / "torch_123", std::string(4096, 't'));
  EXPECT_EQ(save_pod_shm(root_ / "shm-a", root_ / "image", runner_), 4096u);
  EXPECT_TRUE(fs::exists(root_ / "image" / kPodShmFile));
}

}  // namespace
}  // namespace nvproxy::checkpoint
