// The parsing of what runtime and CRIU binaries print about themselves: outputs captured from the
// real binaries (test/unit/oci/data: Debian 12's runc 1.1.5 and crun 1.8.1, Debian 13's runc
// 1.1.15 and runsc 20240729, upstream runc 1.4.3 and runsc 20260817).
#include "oci/runtime_features.h"

#include <gtest/gtest.h>

#include "common/fs.h"

using namespace nvproxy;
using namespace nvproxy::oci;

namespace {
std::string data(const std::string& name) {
  return read_file(std::filesystem::path(NVPROXY_OCI_DATA) / name);
}
}  // namespace

TEST(RuntimeFeatures, Runc115HasTheCriuFlag) {
  auto f = parse_runtime_features(RuntimeKind::Runc, data("runc-1.1.5.version"), data("runc-1.1.5.features"));
  EXPECT_EQ(f.error, "");
  EXPECT_EQ(f.version, "1.1.5+ds1");
  ASSERT_TRUE(f.numbers);
  EXPECT_EQ(f.numbers->text(), "1.1.5");
  EXPECT_TRUE(f.criu_flag);
  EXPECT_EQ(f.checkpoint, std::optional<bool>(true));
}

TEST(RuntimeFeatures, Runc1115HasTheCriuFlag) {
  auto f = parse_runtime_features(RuntimeKind::Runc, data("runc-1.1.15.version"), data("runc-1.1.15.features"));
  EXPECT_EQ(f.version, "1.1.15+ds1");
  EXPECT_EQ(f.numbers, (Version{1, 1, 15}));
  EXPECT_TRUE(f.criu_flag);
  EXPECT_EQ(f.checkpoint, std::optional<bool>(true));
}

// runc 1.2 ignores --criu (with a warning); 1.4.3 rejects it: CRIU comes through PATH.
TEST(RuntimeFeatures, Runc143FindsCriuThroughPath) {
  auto f = parse_runtime_features(RuntimeKind::Runc, data("runc-1.4.3.version"), data("runc-1.4.3.features"));
  EXPECT_EQ(f.version, "1.4.3");
  EXPECT_EQ(f.numbers, (Version{1, 4, 3}));
  EXPECT_FALSE(f.criu_flag);
  EXPECT_EQ(f.checkpoint, std::optional<bool>(true));
  EXPECT_FALSE(parse_runtime_features(RuntimeKind::Runc, "runc version 1.2.0\n", "").criu_flag);
  EXPECT_TRUE(parse_runtime_features(RuntimeKind::Runc, "runc version 1.1.99\n", "").criu_flag);
  auto no_features = parse_runtime_features(RuntimeKind::Runc, data("runc-1.1.5.version"), "");
  EXPECT_FALSE(no_features.checkpoint) << "runc 1.0 has no `features`: not told";
}

// runc 1.4.3's checkpoint has --link-remap (and then overrides the CRIU configuration's line
// with its own RPC value); 1.1.5's has not.
TEST(RuntimeFeatures, LinkRemapFlagFromCheckpointHelp) {
  EXPECT_TRUE(parse_runtime_features(RuntimeKind::Runc, data("runc-1.4.3.version"), data("runc-1.4.3.features"),
                                     data("runc-1.4.3.checkpoint-help"))
                  .link_remap_flag);
  EXPECT_FALSE(parse_runtime_features(RuntimeKind::Runc, data("runc-1.1.5.version"), data("runc-1.1.5.features"),
                                      data("runc-1.1.5.checkpoint-help"))
                   .link_remap_flag);
  EXPECT_FALSE(parse_runtime_features(RuntimeKind::Runc, data("runc-1.4.3.version"), "").link_remap_flag);
}

TEST(RuntimeFeatures, CrunSaysWhetherItHasCriu) {
  auto f = parse_runtime_features(RuntimeKind::Crun, data("crun-1.8.1.version"), "");
  EXPECT_EQ(f.version, "1.8.1");
  EXPECT_EQ(f.numbers, (Version{1, 8, 1}));
  EXPECT_FALSE(f.criu_flag);
  EXPECT_EQ(f.checkpoint, std::optional<bool>(false)) << "Debian 12's crun is built without CRIU";
  auto with = parse_runtime_features(RuntimeKind::Crun, "crun version 1.19\n+SYSTEMD +SELINUX +CRIU +YAJL\n", "");
  EXPECT_EQ(with.checkpoint, std::optional<bool>(true));
  // What a checkpoint is refused with before anything is toggled.
  EXPECT_EQ(checkpoint_unsupported(f, "/usr/bin/crun"),
            "crun 1.8.1 (/usr/bin/crun) is built without CRIU (`crun --version` lists no +CRIU) and has no checkpoint command");
  EXPECT_EQ(checkpoint_unsupported(with, "/usr/local/lib/nvproxy-crun/crun"), "");
  EXPECT_EQ(checkpoint_unsupported(RuntimeFeatures{.kind = RuntimeKind::Runc}, "runc"), "") << "not told: not refused";
  RuntimeFeatures runc_off{.kind = RuntimeKind::Runc, .version = "1.4.3", .checkpoint = false};
  EXPECT_EQ(checkpoint_unsupported(runc_off, "/usr/sbin/runc"),
            "runc 1.4.3 (/usr/sbin/runc) says checkpoint is not enabled (org.opencontainers.runc.checkpoint.enabled in `runc "
            "features`)");
}

TEST(RuntimeFeatures, RunscIsADatedRelease) {
  auto f = parse_runtime_features(RuntimeKind::Runsc, data("runsc-20260817.version"), "");
  EXPECT_EQ(f.error, "");
  EXPECT_EQ(f.version, "release-20260817.0-70-g3c5eee17d");
  EXPECT_FALSE(f.numbers);
  EXPECT_FALSE(f.criu_flag);
  EXPECT_EQ(parse_runtime_features(RuntimeKind::Runsc, data("runsc-20240729.version"), "").version, "0.0~20240729.0");
}

TEST(RuntimeFeatures, UnknownOutputIsAnError) {
  auto f = parse_runtime_features(RuntimeKind::Runc, "", "");
  EXPECT_NE(f.error, "");
  EXPECT_FALSE(f.criu_flag) << "an unknown runc gets CRIU through PATH, which every version reads";
}

TEST(CriuVersion, Parsed) {
  auto c = parse_criu_version("Version: 4.2.1\n");
  EXPECT_EQ(c.version, "4.2.1");
  EXPECT_EQ(c.numbers, (Version{4, 2, 1}));
  EXPECT_EQ(parse_criu_version("Version: 4.1\nGitID: v4.1-12-gabc\n").numbers, (Version{4, 1, 0}));
  EXPECT_EQ(parse_criu_version("Version: 3.17.1\n").numbers, (Version{3, 17, 1}));
  EXPECT_NE(parse_criu_version("criu: unknown option\n").error, "");
}

TEST(Version, FirstDottedNumber) {
  EXPECT_EQ(parse_version("6.18.44-fc-v1045"), (Version{6, 18, 44}));
  EXPECT_EQ(parse_version("6.1.0-28-amd64"), (Version{6, 1, 0}));
  EXPECT_EQ(parse_version("v1.4.3-0-gbb14dabeb"), std::nullopt) << "not after a letter";
  EXPECT_EQ(parse_version("runc 1.4.3"), (Version{1, 4, 3}));
  EXPECT_FALSE(parse_version("none"));
  EXPECT_LT((Version{4, 1, 1}), (Version{4, 2, 0}));
}

// The project's CRIU (scripts/build-criu.sh with its patch) lists the option; upstream's does not
// (the same help without the patch's three lines).
TEST(CriuHelp, TellsThePatchedCriu) {
  EXPECT_TRUE(criu_help_lists_skip_zero_pages(data("criu-4.2.1-patched.help")));
  EXPECT_FALSE(criu_help_lists_skip_zero_pages(data("criu-4.2.1.help")));
  // Named in another option's description only: not the option.
  EXPECT_FALSE(criu_help_lists_skip_zero_pages("  --auto-dedup   like --skip-zero-pages, for parents\n"));
}

// The page I/O patch (scripts/criu-page-io.patch) adds two options after --skip-zero-pages; the
// help of the CRIU it builds lists all three, the zero-pages-only build neither of the new ones.
TEST(CriuHelp, TellsThePageIoPatch) {
  const std::string page_io = data("criu-4.2.1-page-io.help");
  EXPECT_TRUE(criu_help_lists_skip_zero_pages(page_io));
  EXPECT_TRUE(criu_help_lists_option(page_io, "--page-writers"));
  EXPECT_TRUE(criu_help_lists_option(page_io, "--restore-huge-pages"));
  EXPECT_TRUE(criu_help_lists_option(page_io, "--page-readers"));
  EXPECT_FALSE(criu_help_lists_option(data("criu-4.2.1-patched.help"), "--page-writers"));
  EXPECT_FALSE(criu_help_lists_option(data("criu-4.2.1-patched.help"), "--restore-huge-pages"));
  // A prefix of a longer option is not the option.
  EXPECT_FALSE(criu_help_lists_option("  --page-writers-max N   something\n", "--page-writers"));
}

TEST(CriuDumpLog, ZeroPagesLeftOutAreSummedOverProcesses) {
  auto dir = std::filesystem::path(::testing::TempDir()) / "criu-dump-log";
  std::filesystem::create_directories(dir);
  write_file_atomic(dir / "dump.log",
                    "(00.077152) Pagemap generated: 0 pages (0 lazy) 0 holes 0 zero\n"
                    "(00.118783) Zero pages left out: 65535 (262140 KiB)\n"
                    "(00.218783) Zero pages left out: 3 (12 KiB)\n");
  EXPECT_EQ(criu_zero_pages_left_out(dir / "dump.log"), std::optional<std::uint64_t>((262140 + 12) * 1024ULL));
  write_file_atomic(dir / "plain.log", "(00.077152) Pagemap generated: 5 pages (0 lazy) 0 holes\n");
  EXPECT_EQ(criu_zero_pages_left_out(dir / "plain.log"), std::nullopt);
  EXPECT_EQ(criu_zero_pages_left_out(dir / "missing.log"), std::nullopt);
}
