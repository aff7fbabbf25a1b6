// Kubernetes' checkpoint image (kube_checkpoint.h) from a CRI archive whose checkpoint/ refers to
// the image store: the memory pushed as the shim's artifact, then an OCI image whose one layer is
// the archive with a registry reference, annotated as containerd's CRI looks for it.
#include "checkpoint/registry/kube_checkpoint.h"
#include "checkpoint/registry/kube_restore.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "checkpoint/image/image_store.h"
#include "checkpoint/image/layout_blobs.h"
#include "checkpoint/registry/ctr_checkpoint.h"
#include "common/error.h"
#include "common/fs.h"
#include "test/unit/checkpoint/memory_registry.h"

namespace nvproxy::checkpoint {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class KubeCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::remove_all(root_);
    fs::create_directories(root_ / "archive");
    ImageStore store(root_ / "store", 3);
    fs::path entry = store.create("k8s.io", "llm");
    write_file_atomic(entry / "pages-1.img", std::string(8192, 'p'));
    write_file_atomic(entry / "inventory.img", "inventory");
    write_file_atomic(entry / ImageRecord::kFileName, R"({"version":1,"container":"llm","cuda_processes":0,"cuda_pids":[]})");
    store.refer(root_ / "archive" / "checkpoint", entry, "llm");
    write_file_atomic(root_ / "archive" / "config.dump", R"({"id":"abc","name":"llm_pod_default_uid_0"})");
    write_file_atomic(root_ / "archive" / "spec.dump", R"({"annotations":{"io.kubernetes.cri.container-name":"llm"}})");
    write_file_atomic(root_ / "archive" / "status.dump", "{}");
    RunResult r = runner_.run(Command{.argv = {"tar", "-cf", archive_.string(), "-C", (root_ / "archive").string(), "."}});
    ASSERT_TRUE(r.ok()) << r.describe();
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_ = fs::temp_directory_path() / ("nvproxy-kube-" + std::to_string(::getpid()));
  fs::path archive_ = root_ / "checkpoint.tar";
  MemoryRegistry registry_{fs::temp_directory_path() / ("nvproxy-kube-reg-" + std::to_string(::getpid()))};
  DirectWaiter waiter_;
  ProcessRunner runner_{waiter_};
};

TEST_F(KubeCheckpointTest, TheArchiveBecomesAnAnnotatedImageThatRefersToItsPushedMemory) {
  KubePushResult r = push_kube_checkpoint(archive_, "reg:5000/ckpt/llm:v1", root_ / "store", registry_, runner_);
  EXPECT_EQ(r.container, "llm") << "the pod spec's name, as containerd's own checkpoint images carry";
  ASSERT_EQ(registry_.pushed.size(), 2u);
  EXPECT_EQ(registry_.pushed[0].reference, "reg:5000/ckpt/llm:v1.data") << "the memory first";
  EXPECT_EQ(r.data.files, 3);
  EXPECT_EQ(registry_.pushed[1].reference, "reg:5000/ckpt/llm:v1");
  EXPECT_EQ(r.image.rfind("reg:5000/ckpt/llm@sha256:", 0), 0u) << r.image;

  json manifest = json::parse(registry_.manifest(r.image).text);
  EXPECT_EQ(manifest["annotations"][kCheckpointNameAnnotation], "llm");
  ASSERT_EQ(manifest["layers"].size(), 1u);
  json config = json::parse(read_file(registry_.blob_file(manifest["config"]["digest"])));
  EXPECT_EQ(config["os"], "linux");
  EXPECT_EQ(config["rootfs"]["diff_ids"][0], manifest["layers"][0]["digest"])
      << "an uncompressed layer: its digest is its diff id";

  // The layer: the archive's files, its checkpoint/ now the registry's reference and the record.
  fs::path out = root_ / "layer";
  fs::create_directories(out);
  RunResult t = runner_.run(
      Command{.argv = {"tar", "-xf", registry_.blob_file(manifest["layers"][0]["digest"]).string(), "-C", out.string()}});
  ASSERT_TRUE(t.ok()) << t.describe();
  for (const char* f : {"config.dump", "spec.dump", "status.dump"}) EXPECT_TRUE(fs::exists(out / f)) << f;
  EXPECT_FALSE(fs::exists(out / "checkpoint" / "pages-1.img")) << "the memory travels apart";
  auto ref = read_image_ref(out / "checkpoint");
  ASSERT_TRUE(ref.has_value());
  EXPECT_EQ(ref->registry, r.data.pinned);
  EXPECT_TRUE(fs::exists(out / "checkpoint" / ImageRecord::kFileName));
  EXPECT_FALSE(fs::exists(root_ / "store" / ".outgoing")) << "the push lays nothing out";
  EXPECT_FALSE(fs::exists(root_ / "store" / (".kube-push-" + std::to_string(::getpid())))) << "the work directory is removed";
}

TEST_F(KubeCheckpointTest, WhatIsNotACriArchiveIsRefusedNamingIt) {
  write_file_atomic(root_ / "plain", "x");
  RunResult r = runner_.run(Command{.argv = {"tar", "-cf", (root_ / "plain.tar").string(), "-C", root_.string(), "plain"}});
  ASSERT_TRUE(r.ok());
  try {
    push_kube_checkpoint(root_ / "plain.tar", "reg/x:v1", root_ / "store", registry_, runner_);
    ADD_FAILURE() << "pushed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("plain.tar is not a CRI checkpoint archive: it has no spec.dump"), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(registry_.pushed.empty());
  EXPECT_THROW(push_kube_checkpoint(root_ / "none.tar", "reg/x:v1", root_ / "store", registry_, runner_), Error);
}

// Node B without CRI's restore (restore by annotation): the shim pulls the image itself and gets
// the archive back as the kubelet wrote it.
TEST_F(KubeCheckpointTest, ThePushedImageUnpacksBackIntoTheArchive) {
  KubePushResult r = push_kube_checkpoint(archive_, "reg:5000/ckpt/llm:v1", root_ / "store", registry_, runner_);
  KubeCheckpoint k = fetch_kube_checkpoint(r.image, root_ / "b", registry_, runner_);
  EXPECT_EQ(k.container, "llm");
  EXPECT_EQ(k.spec["annotations"]["io.kubernetes.cri.container-name"], "llm");
  EXPECT_EQ(k.config["name"], "llm_pod_default_uid_0");
  auto ref = read_image_ref(k.checkpoint());
  ASSERT_TRUE(ref);
  EXPECT_EQ(ref->registry, r.data.pinned) << "the memory stays in the registry until the restore pulls it";
  EXPECT_FALSE(fs::exists(root_ / "b" / "layout")) << "the pulled layout goes once unpacked";
}

TEST_F(KubeCheckpointTest, AnImageThatIsNoCheckpointImageIsRefused) {
  KubePushResult r = push_kube_checkpoint(archive_, "reg:5000/ckpt/llm:v1", root_ / "store", registry_, runner_);
  try {
    fetch_kube_checkpoint(r.data.pinned, root_ / "b", registry_, runner_);
    FAIL() << "the memory's artifact was taken for a checkpoint image";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("is not a checkpoint image"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace nvproxy::checkpoint
