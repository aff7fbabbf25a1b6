// The content-defined chunk plan of a checkpoint image (checkpoint/registry/chunk_plan.h) on real files:
// chunks tile each file and carry the sha256 of their bytes, cuts follow content (an insertion moves
// only the chunks around it), zero runs cut only at max, and the thread count changes nothing.
#include "checkpoint/registry/chunk_plan.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "checkpoint/image/sha256.h"
#include "common/error.h"

using namespace nvproxy;
using namespace nvproxy::checkpoint;
namespace fs = std::filesystem;

namespace {

constexpr std::uint64_t kPage = 4096;
constexpr std::uint64_t kMiB = 1ull << 20;
const std::string kEmptyDigest = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

std::string random_bytes(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; i += 8) {
    const std::uint64_t v = gen();
    for (std::size_t b = 0; b < 8 && i + b < n; ++b) s[i + b] = static_cast<char>(v >> (8 * b));
  }
  return s;
}

std::vector<FileChunk> chunks_of(const std::vector<FileChunk>& all, const std::string& path) {
  std::vector<FileChunk> out;
  for (const auto& c : all)
    if (c.path == path) out.push_back(c);
  return out;
}

// The chunks of `bytes` tile it in order and each digest is that of its range; none exceeds max.
void expect_tiles(const std::vector<FileChunk>& chunks, const std::string& bytes, std::uint64_t max) {
  ASSERT_FALSE(chunks.empty());
  std::uint64_t at = 0;
  for (const auto& c : chunks) {
    EXPECT_EQ(c.offset, at);
    EXPECT_LE(c.size, max) << "chunk at " << c.offset;
    EXPECT_EQ(c.digest, sha256_of(std::string_view(bytes).substr(c.offset, c.size))) << "chunk at " << c.offset;
    at += c.size;
  }
  EXPECT_EQ(at, bytes.size());
}

void expect_same(const std::vector<FileChunk>& a, const std::vector<FileChunk>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].path, b[i].path) << i;
    EXPECT_EQ(a[i].offset, b[i].offset) << i;
    EXPECT_EQ(a[i].size, b[i].size) << i;
    EXPECT_EQ(a[i].digest, b[i].digest) << i;
  }
}

class ChunkPlan : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "chunk_plan.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  void write(const std::string& rel, const std::string& bytes) {
    fs::create_directories((dir_ / rel).parent_path());
    std::ofstream(dir_ / rel, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  std::vector<FileChunk> plan(std::uint64_t max, int threads = 4) {
    return plan_chunks(dir_, {.max_bytes = max, .threads = threads});
  }

  fs::path dir_;
};

}  // namespace

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_of("abc"), "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_of(""), kEmptyDigest);
  Sha256 h;  // in pieces, as the chunk plan feeds it
  h.update("a", 1);
  h.update("bc", 2);
  EXPECT_EQ(h.finish(), sha256_of("abc"));
  EXPECT_THROW(h.finish(), Error) << "finish is once";
}

TEST_F(ChunkPlan, ChunksTileEachFileInPathOrderAndAreCutByContent) {
  const std::string big = random_bytes(8 * kMiB + 1000, 1);  // ends with a partial page
  const std::string small = random_bytes(5000, 2);
  write("pages-1.img", big);
  write("a/core-1.img", small);
  const auto chunks = plan(kMiB);
  ASSERT_FALSE(chunks.empty());
  EXPECT_EQ(chunks.front().path, "a/core-1.img") << "sorted by relative path";
  EXPECT_EQ(chunks.back().path, "pages-1.img");

  const auto small_chunks = chunks_of(chunks, "a/core-1.img");
  EXPECT_EQ(small_chunks.size(), 1u) << "a file smaller than min is one chunk";
  expect_tiles(small_chunks, small, kMiB);

  const auto big_chunks = chunks_of(chunks, "pages-1.img");
  expect_tiles(big_chunks, big, kMiB);
  ASSERT_GT(big_chunks.size(), 1u);
  int by_content = 0;
  for (std::size_t i = 0; i + 1 < big_chunks.size(); ++i) {
    EXPECT_EQ(big_chunks[i].size % kPage, 0u) << "cuts fall between pages";
    EXPECT_GE(big_chunks[i].size, kMiB / 16) << "no chunk but the last is below min";
    if (big_chunks[i].size != kMiB) ++by_content;
  }
  EXPECT_GT(by_content, 0) << "some cuts are chosen by content, not all at max";
}

// What a push sizes its manifest by: the rule's average over random pages.
TEST_F(ChunkPlan, RandomPagesAverageTheExpectedChunk) {
  write("pages-1.img", random_bytes(64 * kMiB, 9));
  const auto chunks = plan(kMiB);
  const double average = 64.0 * kMiB / static_cast<double>(chunks.size());
  const auto expected = static_cast<double>(expected_chunk_bytes({.max_bytes = kMiB}));
  EXPECT_EQ(expected, kMiB / 16 + kMiB / 4) << "min plus a quarter of max";
  EXPECT_NEAR(average, expected, expected * 0.2) << chunks.size() << " chunks";
  EXPECT_EQ(expected_chunk_bytes({.max_bytes = 4096}), 4096u) << "never past max";
}

TEST_F(ChunkPlan, InsertedPagesMoveOnlyTheChunksAroundThem) {
  const std::string before = random_bytes(8 * kMiB, 3);
  const std::uint64_t at = 4 * kMiB + 5 * kPage;  // a page boundary in the middle
  const std::uint64_t shift = 3 * kPage;
  const std::string after = before.substr(0, at) + random_bytes(shift, 4) + before.substr(at);
  write("pages-1.img", before);
  const auto old_chunks = plan(kMiB);
  write("pages-1.img", after);
  const auto new_chunks = plan(kMiB);
  expect_tiles(new_chunks, after, kMiB);

  std::map<std::uint64_t, FileChunk> new_at;
  for (const auto& c : new_chunks) new_at[c.offset] = c;
  std::set<std::string> old_digests;
  int kept_after = 0;
  for (const auto& c : old_chunks) {
    old_digests.insert(c.digest);
    if (c.offset + c.size <= at) {  // before the insertion: as it was
      ASSERT_TRUE(new_at.contains(c.offset)) << c.offset;
      EXPECT_EQ(new_at[c.offset].size, c.size);
      EXPECT_EQ(new_at[c.offset].digest, c.digest);
    } else if (c.offset + c.size > at + kMiB) {  // resynced: the same bytes, moved by the insertion
      ASSERT_TRUE(new_at.contains(c.offset + shift)) << "old chunk at " << c.offset << " is not cut again";
      EXPECT_EQ(new_at[c.offset + shift].size, c.size);
      EXPECT_EQ(new_at[c.offset + shift].digest, c.digest);
      ++kept_after;
    }
  }
  EXPECT_GE(kept_after, 2);
  int changed = 0;
  for (const auto& c : new_chunks) changed += old_digests.contains(c.digest) ? 0 : 1;
  EXPECT_GE(changed, 1);
  EXPECT_LE(changed, 2) << "only the chunks around the insertion are new";
}

TEST_F(ChunkPlan, ZeroRunsCutOnlyAtMax) {
  write("pages-1.img", std::string(5 * kMiB, '\0'));
  const auto chunks = plan(kMiB);
  ASSERT_EQ(chunks.size(), 5u);
  const std::string zero_mib = sha256_of(std::string(kMiB, '\0'));
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    EXPECT_EQ(chunks[i].offset, i * kMiB);
    EXPECT_EQ(chunks[i].size, kMiB);
    EXPECT_EQ(chunks[i].digest, zero_mib);
  }
}

TEST_F(ChunkPlan, LastPartialPageGoesWithTheLastChunkWithinMax) {
  write("a.img", std::string(2 * kMiB + kMiB / 2 + 100, '\0'));
  write("b.img", std::string(kMiB + 100, '\0'));  // the tail would make a full chunk too large
  const auto chunks = plan(kMiB);
  const auto a = chunks_of(chunks, "a.img");
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[2].size, kMiB / 2 + 100);
  const auto b = chunks_of(chunks, "b.img");
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].size, kMiB);
  EXPECT_EQ(b[1].size, 100u);
  EXPECT_EQ(b[1].digest, sha256_of(std::string(100, '\0')));
}

TEST_F(ChunkPlan, ThreadCountDoesNotChangeThePlan) {
  write("pages-1.img", random_bytes(6 * kMiB + 7, 5));
  write("pages-2.img", random_bytes(3 * kMiB, 6) + std::string(2 * kMiB, '\0') + random_bytes(kMiB, 7));
  write("x/y.img", random_bytes(10, 8));
  const auto one = plan(kMiB, 1);
  const auto four = plan(kMiB, 4);
  EXPECT_GT(one.size(), 6u);
  expect_same(one, four);
  expect_same(one, plan(kMiB, 0));
}

TEST_F(ChunkPlan, EmptyFileIsOneEmptyChunk) {
  write("empty.img", "");
  const auto chunks = plan(kMiB);
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].path, "empty.img");
  EXPECT_EQ(chunks[0].offset, 0u);
  EXPECT_EQ(chunks[0].size, 0u);
  EXPECT_EQ(chunks[0].digest, kEmptyDigest);
}

TEST_F(ChunkPlan, RefusesWhatIsNotARegularFile) {
  write("pages-1.img", "data");
  fs::create_directories(dir_ / "sub");
  ASSERT_EQ(::mkfifo((dir_ / "sub" / "fifo").c_str(), 0600), 0);
  try {
    plan(kMiB);
    FAIL() << "a FIFO is refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("sub/fifo"), std::string::npos) << e.what();
  }
}

TEST_F(ChunkPlan, MissingDirectoryIsAnError) {
  EXPECT_THROW(plan_chunks(dir_ / "nope", {}), Error);
}
