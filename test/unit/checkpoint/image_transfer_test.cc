// Checkpoint images through a registry (image_transfer.h, chunk_transfer.h, image_layout.h)
// against MemoryRegistry: push sends chunks straight from the entry's files and only those the
// registry lacks, pull writes them in place in another store once, resumes where a failed pull
// stopped, takes chunks an earlier pull brought; refusals and damaged transfers leave no entry.
#include "checkpoint/registry/image_transfer.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "checkpoint/image/image_layout.h"
#include "checkpoint/image/image_store.h"
#include "checkpoint/registry/blob_sources.h"
#include "checkpoint/registry/chunk_plan.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/text.h"
#include "test/unit/checkpoint/memory_registry.h"

namespace nvproxy::checkpoint {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string random_bytes(std::size_t n, unsigned seed) {
  std::mt19937_64 g(seed);
  std::string out(n, '\0');
  for (std::size_t i = 0; i + 8 <= n; i += 8) {
    const std::uint64_t v = g();
    std::memcpy(out.data() + i, &v, 8);
  }
  return out;
}

// 64 KiB chunks at most: a 1 MiB file travels as several.
const TransferOptions kSmallChunks{.streams = 4, .attempts = 2, .chunk_bytes = 64 << 10};

class ImageTransferTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::remove_all(root_);
    fs::create_directories(root_);
    ImageStore a(root_ / "store-a", 3);
    entry_ = a.create("k8s.io", "llm");
    // Written pages, then 256 KiB of zeros CRIU left out, then more pages.
    write_file_atomic(entry_ / "pages-1.img",
                      random_bytes(512 << 10, 1) + std::string(256 << 10, '\0') + random_bytes(256 << 10, 2));
    write_file_atomic(entry_ / "inventory.img", "inventory");
    write_file_atomic(entry_ / "same-as-inventory.img", "inventory");
    write_file_atomic(
        entry_ / ImageRecord::kFileName,
        R"({"version":1,"container":"llm","cuda_processes":1,"cuda_pids":[{"pid":7,"name":"python3"}],"runtime":{"name":"runc","version":"1.1.5"},"criu_version":"4.2.1"})");
    client_ = root_ / "ctrd-checkpoint";
    a.refer(client_, entry_, "llm");
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_ = fs::temp_directory_path() / ("nvproxy-transfer-" + std::to_string(::getpid()));
  fs::path entry_, client_;
  MemoryRegistry registry_{fs::temp_directory_path() / ("nvproxy-transfer-reg-" + std::to_string(::getpid()))};
};

TEST_F(ImageTransferTest, APushedImageLandsInAnotherStoreOnceWithTheSameBytes) {
  PushResult pushed = push_image(client_, root_ / "store-a", "reg.example:5000/team/llm:v1", true, registry_, kSmallChunks);
  EXPECT_EQ(pushed.pinned.rfind("reg.example:5000/team/llm@sha256:", 0), 0u) << pushed.pinned;
  EXPECT_EQ(pushed.files, 4);
  EXPECT_GT(pushed.chunks, 8) << "1 MiB in chunks of 64 KiB at most";
  EXPECT_EQ(pushed.sent + pushed.skipped, pushed.bytes);
  EXPECT_GT(pushed.skipped, 0u) << "the zero chunks and the second inventory are the same bytes: sent once";
  auto ref = read_image_ref(client_);
  ASSERT_TRUE(ref.has_value());
  EXPECT_EQ(ref->registry, pushed.pinned) << "--rewrite: the directory refers to the registry";
  EXPECT_TRUE(fs::exists(client_ / ImageRecord::kFileName));
  EXPECT_THROW(resolve_image(client_, root_ / "store-a"), Error) << "a registry reference is pulled, not resolved";

  ArtifactManifest m = parse_artifact_manifest(json::parse(registry_.manifest(pushed.pinned).text));
  std::uint64_t at = 0;
  for (const auto& f : m.files)
    if (f.path == "pages-1.img") {
      EXPECT_EQ(f.offset, at) << "the chunks tile the file";
      EXPECT_LE(f.size, 64u << 10);
      at += f.size;
    }
  EXPECT_EQ(at, 1u << 20);

  std::optional<ImageRecord> checked;
  fs::path got = pull_image(
      ref->registry, root_ / "store-b", registry_, [&](const std::optional<ImageRecord>& r) { checked = r; }, kSmallChunks);
  ASSERT_TRUE(checked.has_value()) << "the record is checked";
  EXPECT_EQ(checked->runtime, "runc");
  EXPECT_TRUE(got.string().rfind((root_ / "store-b").string(), 0) == 0) << got;
  for (const char* f : {"pages-1.img", "inventory.img", "same-as-inventory.img", ImageRecord::kFileName})
    EXPECT_EQ(read_file(got / f), read_file(entry_ / f)) << f;
  struct stat st {};
  ASSERT_EQ(::stat((got / "pages-1.img").c_str(), &st), 0);
  EXPECT_LT(static_cast<std::uint64_t>(st.st_blocks) * 512, 1u << 20) << "the zeros stay holes, as CRIU left them";
  EXPECT_FALSE(fs::exists(got / ".chunks-done")) << "the journal goes with the pull";
  // A second restore from the same reference (a replica) finds the entry.
  const int gets = registry_.gets;
  EXPECT_EQ(pull_image(ref->registry, root_ / "store-b", registry_, [](const auto&) {}), got);
  EXPECT_EQ(registry_.gets, gets);
}

// A server checkpointed again after serving: the same weights, a little new state. The second
// push sends only the chunks that changed, even where the change shifted what follows it.
TEST_F(ImageTransferTest, ASecondPushSendsOnlyWhatChanged) {
  PushResult first = push_image(client_, root_ / "store-a", "reg/llm:v1", false, registry_, kSmallChunks);
  PushResult again = push_image(client_, root_ / "store-a", "reg/llm:v1", false, registry_, kSmallChunks);
  EXPECT_EQ(again.sent, 0u) << "an unchanged image sends nothing";
  EXPECT_EQ(again.pinned, first.pinned);

  // 8 KiB of new pages in the middle of the file: what follows moves by two pages.
  std::string pages = read_file(entry_ / "pages-1.img");
  pages.insert(300 << 10, random_bytes(8 << 10, 3));
  fs::remove(entry_ / "pages-1.img");
  write_file_atomic(entry_ / "pages-1.img", pages);
  PushResult changed = push_image(client_, root_ / "store-a", "reg/llm:v2", false, registry_, kSmallChunks);
  EXPECT_LT(changed.sent, changed.bytes / 4) << "sent " << changed.sent << " of " << changed.bytes;
  EXPECT_NE(changed.pinned, first.pinned);

  // Node B holds v1: its pull of v2 fetches only the chunks v1 lacks.
  pull_image(
      first.pinned, root_ / "store-b", registry_, [](const auto&) {}, kSmallChunks);
  const std::uint64_t before = registry_.bytes_got;
  fs::path v2 = pull_image(
      changed.pinned, root_ / "store-b", registry_, [](const auto&) {}, kSmallChunks);
  EXPECT_LT(registry_.bytes_got - before, changed.bytes / 4);
  EXPECT_EQ(read_file(v2 / "pages-1.img"), pages);
}

// Replicas of one model pushed each to its own repository of one registry: what the registry
// holds in another repository, as this node's store knows from its pushes and pulls, is mounted
// from there (nothing uploaded); another registry, or a repository that no longer holds the blob,
// gets the upload.
TEST_F(ImageTransferTest, AnotherRepositoryOfTheRegistryMountsWhatItHolds) {
  const fs::path store_a = root_ / "store-a";
  const PushResult first = push_image(client_, store_a, "reg.example/team/llm:v1", false, registry_, kSmallChunks);
  EXPECT_EQ(first.mounted, 0u);
  EXPECT_EQ(BlobSources::in_store(store_a, "reg.example/team/llm").size(), 0u) << "a repository is no source for itself";
  EXPECT_EQ(BlobSources::in_store(store_a, "other.example/team/llm").size(), 0u) << "nor for another registry";
  ASSERT_GT(BlobSources::in_store(store_a, "reg.example/team/llm-b").size(), 0u) << "the push is recorded";

  const std::uint64_t put_before = registry_.bytes_put;
  const PushResult replica = push_image(client_, store_a, "reg.example/team/llm-b:v1", false, registry_, kSmallChunks);
  EXPECT_EQ(replica.sent, 0u) << replica.summary;
  EXPECT_EQ(replica.mounted, replica.skipped - first.skipped) << "every chunk mounted (but the image's own repeats)";
  EXPECT_GT(registry_.mounts, 0);
  EXPECT_LT(registry_.bytes_put - put_before, 1024u) << "only the record (the config blob) went up";
  EXPECT_NE(replica.summary.find("mounted from other repositories"), std::string::npos) << replica.summary;

  // Node B pulled llm:v1; what it checkpoints and pushes elsewhere (the same pages) is mounted from llm.
  const fs::path store_b = root_ / "store-b";
  const fs::path pulled = pull_image(
      first.pinned, store_b, registry_, [](const auto&) {}, kSmallChunks);
  EXPECT_EQ(trim(read_file(pulled / kSourceFile)), "reg.example/team/llm");
  const PushResult from_b = push_image(entry_, store_b, "reg.example/team/llm-c:v1", false, registry_, kSmallChunks);
  EXPECT_EQ(from_b.sent, 0u) << from_b.summary;
  EXPECT_GT(from_b.mounted, 0u);
  const PushResult elsewhere = push_image(entry_, store_b, "other.example/team/llm:v1", false, registry_, kSmallChunks);
  EXPECT_EQ(elsewhere.mounted, 0u) << "no mount across registries";
  EXPECT_EQ(elsewhere.sent, first.sent);

  // A store whose only record names a repository that lost the blobs: uploaded, nothing mounted.
  const fs::path store_c = root_ / "store-c";
  record_push(store_c, "reg.example/team/gone", {.manifest_text = registry_.manifest(first.pinned).text});
  ASSERT_GT(BlobSources::in_store(store_c, "reg.example/team/llm-d").size(), 0u);
  const int mounts = registry_.mounts;
  const PushResult stale = push_image(entry_, store_c, "reg.example/team/llm-d:v1", false, registry_, kSmallChunks);
  EXPECT_EQ(stale.mounted, 0u);
  EXPECT_EQ(stale.sent, first.sent);
  EXPECT_EQ(registry_.mounts, mounts);
  EXPECT_GT(stale.chunks, 30);
  EXPECT_LE(registry_.mount_refusals, 16 + kSmallChunks.streams) << "a registry that refuses every mount is not asked on";
  const fs::path copy = pull_image(
      stale.pinned, root_ / "store-d", registry_, [](const auto&) {}, kSmallChunks);
  EXPECT_EQ(read_file(copy / "pages-1.img"), read_file(entry_ / "pages-1.img"));
}

// With zstd on, the chunks of a heap-like page file travel compressed, random ones as they are;
// a pull writes the same bytes, a damaged compressed chunk is refused, a second push sends
// nothing, and a node holding the image pushed without compression copies every chunk from it.
TEST_F(ImageTransferTest, CompressedChunksTravelSmallerAndLandTheSame) {
  std::string heap;
  for (int i = 0; heap.size() < (512u << 10); ++i) heap += "obj " + std::to_string(i) + " refcount=1 type=dict\n";
  heap.resize(512u << 10);
  const std::string pages = heap + random_bytes(512 << 10, 5);
  fs::remove(entry_ / "pages-1.img");
  write_file_atomic(entry_ / "pages-1.img", pages);
  TransferOptions zstd = kSmallChunks;
  zstd.zstd = true;
  const PushResult plain = push_image(client_, root_ / "store-a", "reg/llm:plain", false, registry_, kSmallChunks);
  const std::uint64_t put_before = registry_.bytes_put;
  const PushResult packed = push_image(client_, root_ / "store-a", "reg/llm:zstd", false, registry_, zstd);
  EXPECT_EQ(packed.bytes, plain.bytes);
  EXPECT_GT(packed.sent, 0u) << "the heap's chunks are new blobs in their compressed form";
  EXPECT_LT(registry_.bytes_put - put_before, packed.sent / 4) << "uploaded compressed";
  EXPECT_EQ(packed.wire, registry_.bytes_put - put_before);
  EXPECT_NE(packed.summary.find("(zstd)"), std::string::npos) << packed.summary;

  const json manifest = json::parse(registry_.manifest(packed.pinned).text);
  EXPECT_EQ(manifest["artifactType"], kArtifactTypeCompressed) << "a reader of v1 must refuse it, not misread it";
  int compressed = 0, as_is = 0;
  for (const auto& l : manifest["layers"]) (l["mediaType"] == kFileZstdMediaType ? compressed : as_is)++;
  EXPECT_GT(compressed, 4) << "the heap's chunks";
  EXPECT_GT(as_is, 4) << "the random chunks and the small files travel as they are";
  const ArtifactManifest m = parse_artifact_manifest(manifest);
  const ArtifactManifest m_plain = parse_artifact_manifest(json::parse(registry_.manifest(plain.pinned).text));
  ASSERT_EQ(m.files.size(), m_plain.files.size());
  for (std::size_t i = 0; i < m.files.size(); ++i) EXPECT_EQ(m.files[i].digest, m_plain.files[i].digest) << "the same chunks";

  // A registry that refuses a compressed upload (400): that chunk goes as it is, the push succeeds.
  std::set<std::string> blobs;
  for (const auto& f : m.files)
    if (!f.zstd_digest.empty()) blobs.insert(f.zstd_digest);
  MemoryRegistry other{root_ / "other-registry"};
  other.refuse_put = [&](const std::string& digest) { return digest == *blobs.begin(); };
  const PushResult fallback = push_image(client_, root_ / "store-a", "reg/llm:zstd", false, other, zstd);
  const ArtifactManifest m_fallback = parse_artifact_manifest(json::parse(other.manifest(fallback.pinned).text));
  int plain_now = 0;
  for (const auto& f : m_fallback.files) {
    EXPECT_NE(f.zstd_digest, *blobs.begin());
    plain_now += f.zstd_digest.empty() && !m.files[&f - m_fallback.files.data()].zstd_digest.empty();
  }
  EXPECT_GE(plain_now, 1) << "the refused chunk went as it is";
  const fs::path fell = pull_image(
      fallback.pinned, root_ / "store-d", other, [](const auto&) {}, kSmallChunks);
  EXPECT_EQ(read_file(fell / "pages-1.img"), read_file(entry_ / "pages-1.img"));

  // A compressed blob damaged in the registry: refused, no entry.
  std::string victim;
  for (const auto& f : m.files)
    if (!f.zstd_digest.empty()) victim = f.zstd_digest;
  registry_.damage = [&](const std::string& digest, std::string& bytes) {
    if (digest == victim) bytes[bytes.size() / 2] ^= 1;
  };
  EXPECT_THROW(pull_image(
                   packed.pinned, root_ / "store-c", registry_, [](const auto&) {}, kSmallChunks),
               Error);
  registry_.damage = nullptr;
  const fs::path got = pull_image(
      packed.pinned, root_ / "store-c", registry_, [](const auto&) {}, kSmallChunks);
  for (const char* f : {"pages-1.img", "inventory.img", ImageRecord::kFileName})
    EXPECT_EQ(read_file(got / f), read_file(entry_ / f)) << f;

  EXPECT_EQ(push_image(client_, root_ / "store-a", "reg/llm:zstd2", false, registry_, zstd).sent, 0u)
      << "compressing again gives the same blobs";
  // Store b holds the plain image: the compressed one's chunks are copied from it, none fetched.
  pull_image(
      plain.pinned, root_ / "store-b", registry_, [](const auto&) {}, kSmallChunks);
  const int gets = registry_.gets;
  ChunkPull report;
  pull_image(
      packed.pinned, root_ / "store-b", registry_, [](const auto&) {}, kSmallChunks, &report);
  EXPECT_EQ(registry_.gets, gets);
  EXPECT_EQ(report.fetched, 0u);
}

// Registries refuse a manifest over 4 MiB: a push whose chunks would need a larger one cuts
// larger chunks instead, and says so.
TEST_F(ImageTransferTest, AnImageOfTooManyChunksForAManifestIsCutInLargerOnes) {
  TransferOptions tight = kSmallChunks;
  tight.manifest_budget = 3000;
  const PushResult pushed = push_image(client_, root_ / "store-a", "reg/llm:v1", false, registry_, tight);
  const std::string text = registry_.manifest(pushed.pinned).text;
  EXPECT_LE(text.size(), 3000u);
  EXPECT_GT(pushed.chunks, 4);
  EXPECT_NE(pushed.summary.find("larger than registries take"), std::string::npos) << pushed.summary;
  const fs::path got = pull_image(
      pushed.pinned, root_ / "store-b", registry_, [](const auto&) {}, kSmallChunks);
  EXPECT_EQ(read_file(got / "pages-1.img"), read_file(entry_ / "pages-1.img"));
  EXPECT_EQ(push_image(client_, root_ / "store-a", "reg/llm:v1", false, registry_, kSmallChunks).summary.find("larger than"),
            std::string::npos);
}

// An image near a doubling: pushed once where its manifest needed larger chunks, then smaller
// (within 2x), it is cut as before (the same chunks: little sent), where a store without the
// record of that push cuts it at the configured size (all new chunks).
TEST_F(ImageTransferTest, AnImageJustUnderADoublingIsCutAsTheLastPushWas) {
  const std::string full = read_file(entry_ / "pages-1.img");
  auto write_pages = [&](const std::string& bytes) {
    fs::remove(entry_ / "pages-1.img");
    write_file_atomic(entry_ / "pages-1.img", bytes);
  };
  // A budget the smaller image's manifest fits at the configured size (by its real size and by
  // the estimate) and the full one's does not: 6 more chunks of random pages.
  write_pages(full.substr(0, full.size() - (384 << 10)));
  std::uint64_t small_bytes = 0;
  for (const auto& f : fs::directory_iterator(entry_)) small_bytes += f.file_size();
  MemoryRegistry scratch(root_ / "scratch-registry");
  const PushResult probe = push_image(entry_, "", "reg/probe:v1", false, scratch, kSmallChunks);
  const std::size_t real = scratch.manifest(probe.pinned).text.size();
  const std::size_t estimate = (4 + small_bytes / expected_chunk_bytes({.max_bytes = kSmallChunks.chunk_bytes})) * 280;
  TransferOptions tight = kSmallChunks;
  tight.manifest_budget = std::max(real, estimate) + 100;

  write_pages(full);
  const PushResult big = push_image(client_, root_ / "store-a", "reg/llm:v1", false, registry_, tight);
  ASSERT_NE(big.summary.find("larger than registries take"), std::string::npos) << big.summary;
  write_pages(full.substr(0, full.size() - (384 << 10)));
  const PushResult fresh = push_image(entry_, root_ / "store-b", "reg/llm-b:v1", false, registry_, tight);
  EXPECT_EQ(fresh.summary.find("chunks of up to"), std::string::npos) << "alone, cut at the configured size: " << fresh.summary;
  const PushResult again = push_image(client_, root_ / "store-a", "reg/llm:v2", false, registry_, tight);
  EXPECT_NE(again.summary.find("as the last push into this repository was cut"), std::string::npos) << again.summary;
  EXPECT_LT(again.sent, again.bytes / 10) << "the chunks before the cut are the same blobs";
}

// A large image is cut once, at a size whose manifest fits, instead of being read again.
TEST(StartingChunkBytes, DoubledOnlyForImagesWhoseManifestWouldNotFit) {
  const TransferOptions d;  // 16 MiB, a 3 MiB budget
  EXPECT_EQ(starting_chunk_bytes(std::uint64_t{18} << 30, 151, d), d.chunk_bytes) << "the sglang shape";
  EXPECT_EQ(starting_chunk_bytes(std::uint64_t{40} << 30, 151, d), d.chunk_bytes);
  EXPECT_EQ(starting_chunk_bytes(std::uint64_t{100} << 30, 151, d), 2 * d.chunk_bytes);
  EXPECT_EQ(starting_chunk_bytes(std::uint64_t{400} << 30, 151, d), 8 * d.chunk_bytes);
  TransferOptions zstd = d;
  zstd.zstd = true;  // longer entries
  EXPECT_EQ(starting_chunk_bytes(std::uint64_t{40} << 30, 151, zstd), 2 * d.chunk_bytes);
  EXPECT_EQ(starting_chunk_bytes(0, 0, d), d.chunk_bytes);
  TransferOptions after = d;  // the last push was cut at 32 MiB
  after.last_chunk_bytes = 2 * d.chunk_bytes;
  EXPECT_EQ(starting_chunk_bytes(std::uint64_t{50} << 30, 151, after), 2 * d.chunk_bytes) << "within 2x of needing it";
  EXPECT_EQ(starting_chunk_bytes(std::uint64_t{18} << 30, 151, after), d.chunk_bytes) << "far below: the configured size";
  after.last_chunk_bytes = d.chunk_bytes / 2;
  EXPECT_EQ(starting_chunk_bytes(std::uint64_t{100} << 30, 151, after), 2 * d.chunk_bytes) << "never below what fits";
}

TEST_F(ImageTransferTest, ARefusedRecordPullsNothing) {
  PushResult pushed = push_image(client_, root_ / "store-a", "reg/llm:v1", false, registry_, kSmallChunks);
  EXPECT_FALSE(read_image_ref(client_)->store.empty()) << "without --rewrite the directory is left as it was";
  try {
    pull_image(pushed.pinned, root_ / "store-b", registry_,
               [](const auto&) { throw Error(Code::FailedPrecondition, "driver 570 here, 580 in the image"); });
    FAIL() << "a refused record was pulled";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::FailedPrecondition);
  }
  EXPECT_EQ(registry_.gets, 0) << "the bulk moved before the check";
  EXPECT_FALSE(fs::exists(root_ / "store-b" / "registry")) << "the store was touched";
}

// Each chunk is checked as it arrives: a damaged one is refused, never an entry, and a pull that
// stopped half way resumes with the chunks that are not whole yet.
TEST_F(ImageTransferTest, ADamagedChunkIsRefusedAndAStoppedPullResumes) {
  PushResult pushed = push_image(client_, root_ / "store-a", "reg/llm:v1", false, registry_, kSmallChunks);
  const ArtifactManifest m = parse_artifact_manifest(json::parse(registry_.manifest(pushed.pinned).text));
  const std::string victim = m.files[3].digest;
  registry_.damage = [&](const std::string& digest, std::string& bytes) {
    if (digest == victim) bytes[bytes.size() / 2] ^= 1;
  };
  try {
    pull_image(
        pushed.pinned, root_ / "store-c", registry_, [](const auto&) {}, kSmallChunks);
    FAIL() << "a damaged chunk was taken";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::DataLoss) << e.what();
    EXPECT_NE(std::string(e.what()).find(victim), std::string::npos) << e.what();
  }
  const std::string hex = pushed.pinned.substr(pushed.pinned.find(':') + 1);
  EXPECT_FALSE(fs::exists(root_ / "store-c" / "registry" / "reg_llm" / hex)) << "no entry from a damaged pull";
  const fs::path entry = root_ / "store-b" / "registry" / "reg_llm" / hex;

  // The registry goes away after three fetches: the pull stops part way...
  registry_.damage = nullptr;
  registry_.fail_after_gets = registry_.gets + 3;
  EXPECT_THROW(pull_image(
                   pushed.pinned, root_ / "store-b", registry_, [](const auto&) {}, kSmallChunks),
               Error);
  EXPECT_FALSE(fs::exists(entry));
  // ...and the next one fetches only what is not whole yet.
  registry_.fail_after_gets = -1;
  const int before = registry_.gets;
  fs::path got = pull_image(
      pushed.pinned, root_ / "store-b", registry_, [](const auto&) {}, kSmallChunks);
  EXPECT_EQ(got, entry);
  std::set<std::string> unique;
  for (const auto& f : m.files) unique.insert(f.digest);
  EXPECT_LT(registry_.gets - before, static_cast<int>(unique.size()) - 1) << "resumed, not started again";
  EXPECT_EQ(read_file(got / "pages-1.img"), read_file(entry_ / "pages-1.img"));
}

// Nothing is synced while a pull runs: an entry pulled in another boot (the host went down, maybe
// before its pages reached the disk) is checked chunk by chunk before it is used; a journal's
// chunk whose bytes in place are not its own any more is fetched again.
TEST_F(ImageTransferTest, AnEntryOfAnotherBootIsVerifiedAndAJournalIsNotTakenOnTrust) {
  PushResult pushed = push_image(client_, root_ / "store-a", "reg/llm:v1", false, registry_, kSmallChunks);
  TransferOptions boot1 = kSmallChunks, boot2 = kSmallChunks;
  boot1.boot_id = "boot-1";
  boot2.boot_id = "boot-2";
  const fs::path entry = pull_image(
      pushed.pinned, root_ / "store-b", registry_, [](const auto&) {}, boot1);
  EXPECT_NE(read_file(entry / ".complete").find("boot boot-1"), std::string::npos);
  // The same boot: used as it is (nothing read back).
  int before = registry_.gets;
  EXPECT_EQ(pull_image(
                pushed.pinned, root_ / "store-b", registry_, [](const auto&) {}, boot1),
            entry);
  EXPECT_EQ(registry_.gets, before);
  // Another boot, intact: verified, used, marked as read back.
  EXPECT_EQ(pull_image(
                pushed.pinned, root_ / "store-b", registry_, [](const auto&) {}, boot2),
            entry);
  EXPECT_EQ(registry_.gets, before) << "an intact entry is not fetched again";
  EXPECT_EQ(read_file(entry / ".complete").find("boot "), std::string::npos);
  // Another boot, pages lost: pulled again, whole.
  fs::permissions(entry / "pages-1.img", fs::perms::owner_write, fs::perm_options::add);
  write_file_atomic(entry / ".complete", read_file(entry / ".complete") + "boot boot-1\n", 0600);
  {
    std::string pages = read_file(entry / "pages-1.img");
    pages[100] ^= 1;
    write_file_atomic(entry / "pages-1.img", pages, 0600);
  }
  EXPECT_EQ(pull_image(
                pushed.pinned, root_ / "store-b", registry_, [](const auto&) {}, boot2),
            entry);
  EXPECT_GT(registry_.gets, before);
  EXPECT_EQ(read_file(entry / "pages-1.img"), read_file(entry_ / "pages-1.img"));

  // A stopped pull whose journal lists a chunk the host lost: that chunk is fetched again.
  registry_.fail_after_gets = registry_.gets + 4;
  EXPECT_THROW(pull_image(
                   pushed.pinned, root_ / "store-c", registry_, [](const auto&) {}, kSmallChunks),
               Error);
  registry_.fail_after_gets = -1;
  const std::string hex = pushed.pinned.substr(pushed.pinned.find(':') + 1);
  const fs::path incoming = root_ / "store-c" / "registry" / "reg_llm" / (".incoming-" + hex);
  const std::string journal = read_file(incoming / ".chunks-done");
  ASSERT_NE(journal.find("pages-1.img"), std::string::npos) << journal;
  // Zero the first listed chunk of the page file where it lies.
  std::istringstream lines(journal);
  for (std::string digest, offset, path; lines >> digest >> offset >> path;) {
    if (path != "pages-1.img") continue;
    std::string pages = read_file(incoming / path);
    pages[std::stoull(offset)] ^= 1;
    write_file_atomic(incoming / path, pages, 0600);
    break;
  }
  ChunkPull report;
  const fs::path got = pull_image(
      pushed.pinned, root_ / "store-c", registry_, [](const auto&) {}, kSmallChunks, &report);
  EXPECT_EQ(read_file(got / "pages-1.img"), read_file(entry_ / "pages-1.img"));
  EXPECT_GT(report.resumed, 0u) << "the other listed chunks were kept";
}

TEST_F(ImageTransferTest, WithoutAStoreOrWithAnotherManifestThePullIsRefused) {
  PushResult pushed = push_image(client_, root_ / "store-a", "reg/llm:v1", false, registry_);
  EXPECT_THROW(pull_image(pushed.pinned, "", registry_, [](const auto&) {}), Error);
  std::string other = repository_of(pushed.pinned) + "@sha256:" + std::string(64, 'a');
  EXPECT_THROW(pull_image(other, root_ / "store-b", registry_, [](const auto&) {}), Error);
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

// 0.6.0's images (one layer per file, no offset) still read; chunks that leave a gap are refused.
TEST(ImageLayout, ChunksTileTheirFileAndOldImagesRead) {
  const std::string d = "sha256:" + std::string(64, 'b');
  auto layer = [&](const std::string& title, std::uint64_t size, const char* offset) {
    json a{{"org.opencontainers.image.title", title}};
    if (offset) a[kOffsetAnnotation] = offset;
    return json{{"digest", d}, {"size", size}, {"annotations", a}};
  };
  auto manifest = [](json layers) { return json{{"artifactType", kArtifactType}, {"layers", std::move(layers)}}; };
  ArtifactManifest old =
      parse_artifact_manifest(manifest(json::array({layer("pages-1.img", 10, nullptr), layer("x", 3, nullptr)})));
  EXPECT_EQ(file_sizes(old).at("pages-1.img"), 10u);
  ArtifactManifest chunked =
      parse_artifact_manifest(manifest(json::array({layer("p", 5, "5"), layer("p", 5, "0"), layer("p", 2, "10")})));
  EXPECT_EQ(chunked.files[0].offset, 0u) << "in file order";
  EXPECT_EQ(file_sizes(chunked).at("p"), 12u);
  for (const auto& bad :
       {json::array({layer("p", 5, "0"), layer("p", 5, "6")}), json::array({layer("p", 5, "0"), layer("p", 5, "4")}),
        json::array({layer("p", 5, "1")}), json::array({layer("p", 5, "-1")})})
    EXPECT_THROW(parse_artifact_manifest(manifest(bad)), Error) << bad.dump();
  // A compressed layer needs its own digest and size; a layer of another media type is refused.
  json zlayer = layer("p", 3, nullptr);
  zlayer["mediaType"] = kFileZstdMediaType;
  EXPECT_THROW(parse_artifact_manifest(manifest(json::array({zlayer}))), Error) << "no content digest";
  zlayer["annotations"][kContentDigestAnnotation] = "sha256:" + std::string(64, 'c');
  zlayer["annotations"][kContentSizeAnnotation] = "12";
  const ArtifactManifest z = parse_artifact_manifest(manifest(json::array({zlayer})));
  EXPECT_EQ(z.files[0].size, 12u);
  EXPECT_EQ(z.files[0].zstd_size, 3u);
  EXPECT_EQ(z.files[0].zstd_digest, d);
  json other = layer("p", 3, nullptr);
  other["mediaType"] = "application/vnd.oci.image.layer.v1.tar+gzip";
  EXPECT_THROW(parse_artifact_manifest(manifest(json::array({other}))), Error);
  // What this code writes reads back: offsets only where a file has several chunks.
  const std::string text = artifact_manifest_text({{"p", d, 5, 0}, {"p", d, 7, 5}, {"q", d, 1, 0}}, "{}");
  const json written = json::parse(text);
  EXPECT_TRUE(written["layers"][0]["annotations"].contains(kOffsetAnnotation));
  EXPECT_FALSE(written["layers"][2]["annotations"].contains(kOffsetAnnotation));
  EXPECT_EQ(file_sizes(parse_artifact_manifest(written)).at("p"), 12u);
}

}  // namespace
}  // namespace nvproxy::checkpoint
