// Checkpoint images through a registry (image_transfer.h, image_layout.h) against a registry kept
// in a directory: push lays the image out with hard links, pull lands it in another store once,
// refusals and damaged transfers leave nothing in the store.
#include "checkpoint/image/image_transfer.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "checkpoint/image/image_layout.h"
#include "checkpoint/image/image_store.h"
#include "checkpoint/image/skopeo_registry.h"
#include "common/error.h"
#include "common/fs.h"

namespace nvproxy::checkpoint {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A registry that keeps each pushed layout in a directory of its own, by reference.
class DirRegistry final : public ImageRegistry {
 public:
  explicit DirRegistry(fs::path root) : root_(std::move(root)) {}
  Manifest manifest(const std::string& reference) override {
    ++manifests;
    fs::path d = dir_of(reference);
    if (!fs::exists(d)) throw Error(Code::NotFound, "manifest unknown: " + reference);
    json index = json::parse(read_file(d / "index.json"));
    std::string digest = index["manifests"][0]["digest"];
    return {read_file(d / "blobs" / "sha256" / digest.substr(7)), digest};
  }
  std::string push(const fs::path& layout, const std::string&, const std::string& reference) override {
    fs::path d = dir_of(reference);
    fs::remove_all(d);
    fs::create_directories(d.parent_path());
    fs::copy(layout, d, fs::copy_options::recursive);
    json index = json::parse(read_file(d / "index.json"));
    return index["manifests"][0]["digest"];
  }
  void pull(const std::string& reference, const fs::path& layout, const std::string&) override {
    ++pulls;
    fs::copy(dir_of(reference), layout, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
    if (damage) damage(layout);
  }
  fs::path dir_of(const std::string& reference) const {
    std::string repo = repository_of(reference);
    for (char& c : repo) c = c == '/' || c == ':' ? '_' : c;
    return root_ / repo;
  }
  int manifests = 0, pulls = 0;
  std::function<void(const fs::path&)> damage;

 private:
  fs::path root_;
};

class ImageTransferTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("nvproxy-transfer-" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
    ImageStore a(root_ / "store-a", 3);
    entry_ = a.create("k8s.io", "llm");
    write_file_atomic(entry_ / "pages-1.img", std::string(8192, 'p') + std::string(4096, '\0'));
    write_file_atomic(entry_ / "inventory.img", "inventory");
    write_file_atomic(entry_ / "same-as-inventory.img", "inventory");
    write_file_atomic(
        entry_ / ImageRecord::kFileName,
        R"({"version":1,"container":"llm","cuda_processes":1,"cuda_pids":[{"pid":7,"name":"python3"}],"runtime":{"name":"runc","version":"1.1.5"},"criu_version":"4.2.1"})");
    client_ = root_ / "ctrd-checkpoint";
    a.refer(client_, entry_, "llm");
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_, entry_, client_;
  DirRegistry registry_{fs::temp_directory_path() / ("nvproxy-transfer-reg-" + std::to_string(::getpid()))};
  DirectWaiter waiter_;
  ProcessRunner runner_{waiter_};
  ~ImageTransferTest() override { fs::remove_all(registry_.dir_of("x").parent_path()); }
};

ino_t inode_of(const fs::path& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 ? st.st_ino : 0;
}

TEST_F(ImageTransferTest, APushedImageLandsInAnotherStoreOnceWithTheSameBytes) {
  // The layout's blobs are the entry's files: no second copy on the node that pushes.
  std::string manifest = write_layout(entry_, root_ / "layout", runner_);
  ArtifactManifest m = parse_artifact_manifest(json::parse(manifest));
  ASSERT_EQ(m.files.size(), 4u);
  ASSERT_TRUE(m.record.has_value());
  EXPECT_EQ(m.record->container, "llm");
  for (const auto& f : m.files) {
    if (f.path == "same-as-inventory.img") continue;  // the same bytes as inventory.img: one blob, linked to that
    EXPECT_EQ(inode_of(root_ / "layout" / "blobs" / "sha256" / f.digest.substr(7)), inode_of(entry_ / f.path)) << f.path;
  }

  PushResult pushed = push_image(client_, root_ / "store-a", "reg.example:5000/team/llm:v1", true, registry_, runner_);
  EXPECT_EQ(pushed.pinned.rfind("reg.example:5000/team/llm@sha256:", 0), 0u) << pushed.pinned;
  EXPECT_EQ(pushed.files, 4);
  EXPECT_FALSE(fs::exists(root_ / "store-a" / ".outgoing" / std::to_string(::getpid()))) << "the layout is removed";
  auto ref = read_image_ref(client_);
  ASSERT_TRUE(ref.has_value());
  EXPECT_EQ(ref->registry, pushed.pinned) << "--rewrite: the directory refers to the registry";
  EXPECT_TRUE(fs::exists(client_ / ImageRecord::kFileName));
  EXPECT_THROW(resolve_image(client_, root_ / "store-a"), Error) << "a registry reference is pulled, not resolved";

  std::optional<ImageRecord> checked;
  fs::path got =
      pull_image(ref->registry, root_ / "store-b", registry_, [&](const std::optional<ImageRecord>& r) { checked = r; });
  ASSERT_TRUE(checked.has_value()) << "the record is checked";
  EXPECT_EQ(checked->runtime, "runc");
  EXPECT_TRUE(got.string().rfind((root_ / "store-b").string(), 0) == 0) << got;
  for (const char* f : {"pages-1.img", "inventory.img", "same-as-inventory.img", ImageRecord::kFileName})
    EXPECT_EQ(read_file(got / f), read_file(entry_ / f)) << f;
  // A second restore from the same reference (a replica) finds the entry.
  EXPECT_EQ(pull_image(ref->registry, root_ / "store-b", registry_, [](const auto&) {}), got);
  EXPECT_EQ(registry_.pulls, 1);
}

TEST_F(ImageTransferTest, ARefusedRecordPullsNothing) {
  PushResult pushed = push_image(client_, root_ / "store-a", "reg/llm:v1", false, registry_, runner_);
  EXPECT_FALSE(read_image_ref(client_)->store.empty()) << "without --rewrite the directory is left as it was";
  try {
    pull_image(pushed.pinned, root_ / "store-b", registry_,
               [](const auto&) { throw Error(Code::FailedPrecondition, "driver 570 here, 580 in the image"); });
    FAIL() << "a refused record was pulled";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::FailedPrecondition);
  }
  EXPECT_EQ(registry_.pulls, 0) << "the bulk moved before the check";
  EXPECT_FALSE(fs::exists(root_ / "store-b" / "registry")) << "the store was touched";
}

TEST_F(ImageTransferTest, ABlobCutShortIsDataLossAndLeavesNothingHalfWritten) {
  PushResult pushed = push_image(client_, root_ / "store-a", "reg/llm:v1", false, registry_, runner_);
  std::string pages_digest;
  for (const auto& f : parse_artifact_manifest(json::parse(registry_.manifest(pushed.pinned).text)).files)
    if (f.path == "pages-1.img") pages_digest = f.digest;
  registry_.damage = [&](const fs::path& layout) { fs::resize_file(layout / "blobs" / "sha256" / pages_digest.substr(7), 100); };
  try {
    pull_image(pushed.pinned, root_ / "store-b", registry_, [](const auto&) {});
    FAIL() << "a cut blob was taken";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::DataLoss);
    EXPECT_NE(std::string(e.what()).find("pages-1.img"), std::string::npos) << e.what();
  }
  for (const auto& e : fs::recursive_directory_iterator(root_ / "store-b"))
    EXPECT_TRUE(e.is_directory() || e.path().extension() == ".lock") << "left behind: " << e.path();
}

TEST_F(ImageTransferTest, WithoutAStoreOrWithAnotherManifestThePullIsRefused) {
  PushResult pushed = push_image(client_, root_ / "store-a", "reg/llm:v1", false, registry_, runner_);
  EXPECT_THROW(pull_image(pushed.pinned, "", registry_, [](const auto&) {}), Error);
  std::string other = repository_of(pushed.pinned) + "@sha256:" + std::string(64, 'a');
  try {
    pull_image(other, root_ / "store-b", registry_, [](const auto&) {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::DataLoss) << e.what();
  }
}

TEST(ImageLayout, ManifestsThatAreNotOurImagesAreRefusedNamingWhy) {
  auto manifest = [](const std::string& title, const std::string& digest, const char* type = kArtifactType) {
    return json{{"artifactType", type},
                {"layers",
                 json::array({{{"digest", digest}, {"size", 1}, {"annotations", {{"org.opencontainers.image.title", title}}}}})}};
  };
  const std::string d = "sha256:" + std::string(64, 'b');
  EXPECT_NO_THROW(parse_artifact_manifest(manifest("pages-1.img", d)));
  for (const auto& [m, why] : std::vector<std::pair<json, std::string>>{
           {manifest("../../etc/passwd", d), "not a path inside the image"},
           {manifest("/etc/passwd", d), "not a path inside the image"},
           {manifest("a/../b", d), "not a path inside the image"},
           {manifest("pages-1.img", "sha256:xyz"), "has the digest"},
           {manifest("pages-1.img", d, "application/vnd.oci.image.config.v1+json"), "artifact type"}}) {
    try {
      parse_artifact_manifest(m);
      ADD_FAILURE() << m.dump();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Code::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  }
}

TEST(ImageLayout, RepositoryOfAReference) {
  EXPECT_EQ(repository_of("host:5000/team/llm:v1"), "host:5000/team/llm");
  EXPECT_EQ(repository_of("host:5000/team/llm"), "host:5000/team/llm");
  EXPECT_EQ(repository_of("host/llm@sha256:abc"), "host/llm");
  EXPECT_EQ(repository_of("llm:v1"), "llm");
}

// A node without containers-common has no /etc/containers/policy.json, and skopeo then refuses
// every copy (measured on the H200): without a policy file the copies run with --insecure-policy,
// with one they keep it.
TEST(SkopeoRegistry, CopiesRunWithoutAPolicyWhereTheNodeHasNone) {
  fs::path dir = fs::temp_directory_path() / ("nvproxy-skopeo-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::path args = dir / "args";
  write_file_atomic(dir / "skopeo",
                    "#!/bin/sh\necho \"$@\" >>" + args.string() +
                        "\nfor a; do case $a in --digestfile=*) echo sha256:0 >\"${a#--digestfile=}\";; esac; done\n");
  fs::permissions(dir / "skopeo", fs::perms::owner_all);
  fs::create_directories(dir / "layout");
  DirectWaiter waiter;
  ProcessRunner runner(waiter);
  for (bool policy : {false, true}) {
    if (policy) write_file_atomic(dir / "policy.json", "{}");
    SkopeoRegistry r({.skopeo = (dir / "skopeo").string(), .policy_file = (dir / "policy.json").string()}, runner);
    r.push(dir / "layout", "nvproxy", "127.0.0.1:5000/ckpt/x:v1");
    r.pull("127.0.0.1:5000/ckpt/x@sha256:0", dir / "layout", "nvproxy");
  }
  std::vector<std::string> calls;
  std::istringstream in(read_file(args));
  for (std::string l; std::getline(in, l);) calls.push_back(l);
  ASSERT_EQ(calls.size(), 4u);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(calls[i].starts_with("--insecure-policy copy "), i < 2) << "call " << i << ": " << calls[i];
  fs::remove_all(dir);
}
}  // namespace
}  // namespace nvproxy::checkpoint
