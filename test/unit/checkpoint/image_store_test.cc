// The shim's image store (image_store.h): entries, references, resolution, retention, packing.
#include "checkpoint/image/image_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/image/image_record.h"
#include "common/error.h"
#include "common/fs.h"

namespace nvproxy::checkpoint {
namespace {

namespace fs = std::filesystem;

class ImageStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("nvproxy-store-" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

TEST_F(ImageStoreTest, ARestoreReadsTheEntryItsReferenceNames) {
  ImageStore store(root_ / "store", 3);
  fs::path entry = store.create("k8s.io", "llm");
  EXPECT_EQ(entry.parent_path(), root_ / "store" / "k8s.io" / "llm");
  struct stat st {};
  ASSERT_EQ(::stat((root_ / "store").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u) << "the store holds process memory";
  write_file_atomic(entry / "pages-1.img", std::string(4096, 'p'));
  write_file_atomic(entry / ImageRecord::kFileName, R"({"version":1,"cuda_processes":0,"cuda_pids":[]})");
  fs::path client = root_ / "ctrd-checkpoint123";
  store.refer(client, entry, "llm");
  EXPECT_TRUE(fs::exists(client / kImageRefFile));
  EXPECT_TRUE(fs::exists(client / ImageRecord::kFileName)) << "the record travels with the reference";
  EXPECT_FALSE(fs::exists(client / "pages-1.img")) << "one copy: containerd packs the reference only";
  auto ref = read_image_ref(client);
  ASSERT_TRUE(ref);
  EXPECT_EQ(ref->container, "llm");
  EXPECT_EQ(resolve_image(client, root_ / "store"), entry);
  EXPECT_EQ(resolve_image(entry, root_ / "store"), entry) << "a whole image resolves to itself";
}

TEST_F(ImageStoreTest, AReferenceIsRefusedOutsideThisShimsStoreOrOnceItsEntryIsGone) {
  ImageStore store(root_ / "store", 3);
  fs::path entry = store.create("default", "c");
  fs::path client = root_ / "client";
  store.refer(client, entry, "c");
  auto refused = [&](const fs::path& configured) -> std::string {
    try {
      resolve_image(client, configured);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Code::FailedPrecondition);
      return e.what();
    }
    return "resolved";
  };
  EXPECT_NE(refused("").find("this shim has no image store"), std::string::npos);
  EXPECT_NE(refused(root_ / "other").find("not this shim's store"), std::string::npos);
  store.discard(entry);
  EXPECT_NE(refused(root_ / "store").find("which is gone"), std::string::npos);
  // A crafted reference cannot point a restore out of the store.
  write_file_atomic(client / kImageRefFile,
                    R"({"version":1,"store":")" + (root_ / "store").string() + R"(","entry":"../../etc/x"})");
  EXPECT_THROW(resolve_image(client, root_ / "store"), Error);
  write_file_atomic(client / kImageRefFile, "{nope");
  EXPECT_THROW(read_image_ref(client), Error);
}

TEST_F(ImageStoreTest, RetentionKeepsTheNewestEntriesOfEachContainer) {
  ImageStore store(root_ / "store", 2);
  std::vector<fs::path> made;
  for (int i = 0; i < 4; ++i) made.push_back(store.create("ns", "a"));
  fs::path other = store.create("ns", "b");
  auto removed = store.retain("ns", "a");
  EXPECT_EQ(removed, (std::vector<fs::path>{made[0], made[1]}));
  EXPECT_FALSE(fs::exists(made[1]));
  EXPECT_TRUE(fs::exists(made[2]));
  EXPECT_TRUE(fs::exists(made[3]));
  EXPECT_TRUE(fs::exists(other)) << "another container's entries are its own";
  fs::last_write_time(made[2], fs::file_time_type::clock::now() - std::chrono::hours(48));
  EXPECT_EQ(store.prune_older_than(std::chrono::hours(24)), std::vector<fs::path>{made[2]});
  EXPECT_TRUE(fs::exists(made[3]));
}

// A pull's unfinished directory (STORE/registry/REPO/.incoming-DIGEST) goes with `image prune` once
// nothing in it has been written for the given age; one whose journal moved lately is still pulling.
TEST_F(ImageStoreTest, PruneTakesAbandonedPullsButNotOnesStillWriting) {
  ImageStore store(root_ / "store", 2);
  const auto old = fs::file_time_type::clock::now() - std::chrono::hours(48);
  const fs::path repo = root_ / "store" / "registry" / "reg_5000_ckpt_llm";
  const fs::path abandoned = repo / ".incoming-aaaa", moving = repo / ".incoming-bbbb";
  for (const auto& d : {abandoned, moving}) {
    fs::create_directories(d);
    write_file_atomic(d / "pages-1.img", "pages", 0600);
    write_file_atomic(d / ".chunks-done", "sha256:x 0 pages-1.img\n", 0600);
    fs::last_write_time(d / "pages-1.img", old);
    fs::last_write_time(d, old);
  }
  fs::last_write_time(abandoned / ".chunks-done", old);
  EXPECT_EQ(store.prune_older_than(std::chrono::hours(24)), std::vector<fs::path>{abandoned});
  EXPECT_FALSE(fs::exists(abandoned));
  EXPECT_TRUE(fs::exists(moving / "pages-1.img"));
}

TEST_F(ImageStoreTest, PackMakesASelfContainedCopy) {
  ImageStore store(root_ / "store", 3);
  fs::path entry = store.create("ns", "c");
  fs::create_directories(entry / "sub");
  write_file_atomic(entry / "pages-1.img", std::string(100, 'p'));
  write_file_atomic(entry / "sub" / "x", "xy");
  fs::path client = root_ / "client";
  store.refer(client, entry, "c");
  EXPECT_EQ(pack_image(client, root_ / "store", root_ / "out"), 102u);
  EXPECT_EQ(read_file(root_ / "out" / "pages-1.img"), std::string(100, 'p'));
  EXPECT_EQ(read_file(root_ / "out" / "sub" / "x"), "xy");
  EXPECT_FALSE(fs::exists(root_ / "out" / kImageRefFile));
  EXPECT_EQ(resolve_image(root_ / "out", ""), root_ / "out") << "restorable without the store";
  EXPECT_THROW(pack_image(client, root_ / "store", root_ / "out"), Error) << "not over a non-empty directory";
  // Never into the image itself (it would copy itself without end), nor around it.
  EXPECT_THROW(pack_image(root_ / "out", "", root_ / "out" / "again"), Error);
  EXPECT_THROW(pack_image(root_ / "out", "", root_), Error);
  EXPECT_FALSE(fs::exists(root_ / "out" / "again"));
}

}  // namespace
}  // namespace nvproxy::checkpoint
