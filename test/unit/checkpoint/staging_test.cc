// The staging's bill and plan (staging_bill.h), the host-wide account (host_reservations.h), the
// lift and its put-back (limit_lift.h) against a probe over a directory tree standing for
// /sys/fs/cgroup, and the probe's reading of a real-looking cgroup v2 and v1 tree.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "checkpoint/staging/host_reservations.h"
#include "checkpoint/staging/limit_lift.h"
#include "checkpoint/staging/memory_limits.h"
#include "checkpoint/staging/restore_staging.h"
#include "checkpoint/staging/staging_bill.h"
#include "checkpoint/staging/staging_hold.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/scratch_dir.h"
#include "common/unique_fd.h"

namespace nvproxy::checkpoint {
namespace {

namespace fs = std::filesystem;
constexpr std::uint64_t MiB = 1 << 20;

MemoryLimit limit(const std::string& cg, std::uint64_t lim, std::uint64_t usage, std::uint64_t cache = 0) {
  return {.cgroup = cg, .file = "memory.max", .limit = lim, .usage = usage, .reclaimable = cache};
}

StagingBill bill_of(std::uint64_t staged, std::vector<MemoryLimit> limits, std::uint64_t host = 100000 * MiB) {
  StagingBill b;
  b.staged[913] = staged;
  b.limits = std::move(limits);
  b.host_available = host;
  b.margin = 64 * MiB;
  return b;
}

TEST(StagingPlan, NothingStagedLiftsNothing) {
  auto p = plan_staging(bill_of(0, {limit("/c", 100 * MiB, 90 * MiB)}), StagingMode::Lift, "checkpoint");
  EXPECT_FALSE(p.refused);
  EXPECT_TRUE(p.lifts.empty());
  EXPECT_EQ(p.reserve, 0u);
}

TEST(StagingPlan, LiftsOnlyTheLimitsThatWouldBeCrossed) {
  // Container: 6 GiB limit, 1 GiB used; pod: 64 GiB, 20 GiB used; 10 GiB staged.
  auto p = plan_staging(bill_of(10240 * MiB, {limit("/pod/c", 6144 * MiB, 1024 * MiB), limit("/pod", 65536 * MiB, 20480 * MiB)}),
                        StagingMode::Lift, "checkpoint");
  ASSERT_FALSE(p.refused) << p.reason;
  ASSERT_EQ(p.lifts.size(), 1u);
  EXPECT_EQ(p.lifts[0].file, fs::path("/pod/c/memory.max"));
  EXPECT_EQ(p.lifts[0].from, 6144 * MiB);
  EXPECT_EQ(p.lifts[0].to, (1024 + 10240 + 64) * MiB);
  EXPECT_EQ(p.reserve, (10240 + 64) * MiB);
}

TEST(StagingPlan, ReclaimableCacheCountsAsFree) {
  auto p = plan_staging(bill_of(100 * MiB, {limit("/c", 1024 * MiB, 1000 * MiB, 900 * MiB)}), StagingMode::Lift, "checkpoint");
  EXPECT_TRUE(p.lifts.empty()) << "900 MiB of the usage is inactive cache: 924 MiB free";
}

TEST(StagingPlan, TextForDiagnose) {
  auto p = plan_staging(bill_of(10240 * MiB, {limit("/pod/c", 6144 * MiB, 1024 * MiB)}), StagingMode::Lift, "checkpoint");
  std::string t = staging_text(p.json);
  EXPECT_NE(t.find("staging: the driver stages 10.0 GiB"), std::string::npos) << t;
  EXPECT_NE(t.find("pid 913: 10.0 GiB"), std::string::npos) << t;
  EXPECT_NE(t.find("/pod/c/memory.max 6.0 GiB: 5.0 GiB free, crossed: lifted to 11.1 GiB"), std::string::npos) << t;
  EXPECT_EQ(staging_text(plan_staging(bill_of(0, {}), StagingMode::Lift, "checkpoint").json), "");
}

TEST(StagingPlan, RefuseModeNamesTheFigures) {
  auto p = plan_staging(bill_of(10240 * MiB, {limit("/pod/c", 6144 * MiB, 1024 * MiB)}), StagingMode::Refuse, "checkpoint");
  ASSERT_TRUE(p.refused);
  EXPECT_TRUE(p.lifts.empty());
  EXPECT_NE(p.reason.find("/pod/c/memory.max 6.0 GiB with 5.0 GiB free"), std::string::npos) << p.reason;
  EXPECT_NE(p.reason.find("pid 913: 10.0 GiB"), std::string::npos) << p.reason;
}

// A gVisor sandbox's staging is the sentry's, billed as one under its host pid: the reason and
// diagnose's text say so rather than naming a process.
TEST(StagingPlan, ASandboxIsBilledAsOne) {
  StagingBill b = bill_of(10240 * MiB, {limit("/pod/sandbox", 6144 * MiB, 1024 * MiB)});
  b.in_sandbox = true;
  auto p = plan_staging(b, StagingMode::Refuse, "checkpoint");
  ASSERT_TRUE(p.refused);
  EXPECT_NE(p.reason.find("in the sandbox's memory (host pid 913: 10.0 GiB)"), std::string::npos) << p.reason;
  std::string t = staging_text(plan_staging(b, StagingMode::Lift, "checkpoint").json);
  EXPECT_NE(t.find("in the sandbox's memory (host pid 913: 10.0 GiB)"), std::string::npos) << t;
  b.in_sandbox = false;
  EXPECT_NE(plan_staging(b, StagingMode::Refuse, "checkpoint").reason.find("in the processes' memory (pid 913: 10.0 GiB)"),
            std::string::npos);
}

TEST(StagingPlan, HostWithoutRoomIsRefusedWhateverTheMode) {
  StagingBill b = bill_of(129 * 1024 * MiB, {}, 124 * 1024 * MiB);
  for (auto mode : {StagingMode::Lift, StagingMode::Refuse}) {
    auto p = plan_staging(b, mode, "checkpoint");
    ASSERT_TRUE(p.refused);
    EXPECT_NE(p.reason.find("would run the host out of memory"), std::string::npos) << p.reason;
    EXPECT_NE(p.reason.find("124.0 GiB available"), std::string::npos) << p.reason;
  }
}

TEST(StagingPlan, OthersReservationsCount) {
  StagingBill b = bill_of(40 * 1024 * MiB, {}, 100 * 1024 * MiB);
  b.reserved_by_others = 70 * 1024 * MiB;
  b.others = {"container \"a\" (checkpoint, 70.0 GiB, shim pid 1)"};
  auto p = plan_staging(b, StagingMode::Lift, "checkpoint");
  ASSERT_TRUE(p.refused);
  EXPECT_NE(p.reason.find("container \"a\""), std::string::npos) << p.reason;
}

TEST(StagingPlan, V1MemswRaisedFirstByAsMuch) {
  MemoryLimit l{.cgroup = "/c", .file = "memory.limit_in_bytes", .limit = 100 * MiB, .usage = 50 * MiB};
  l.swap_file = "memory.memsw.limit_in_bytes";
  l.swap_limit = 200 * MiB;
  auto p = plan_staging(bill_of(100 * MiB, {l}), StagingMode::Lift, "checkpoint");
  ASSERT_EQ(p.lifts.size(), 2u);
  EXPECT_EQ(p.lifts[0].file, fs::path("/c/memory.memsw.limit_in_bytes"));
  EXPECT_EQ(p.lifts[1].file, fs::path("/c/memory.limit_in_bytes"));
  EXPECT_EQ(p.lifts[0].to - p.lifts[0].from, p.lifts[1].to - p.lifts[1].from);
}

TEST(StagingPlan, RestoreCountsTheImagesOtherPages) {
  StagingBill b = bill_of(100 * MiB, {limit("/c", 150 * MiB, 0)});
  b.resident = 40 * MiB;  // 100 + 40 + 64 > 150
  auto p = plan_staging(b, StagingMode::Lift, "restore");
  ASSERT_EQ(p.lifts.size(), 1u);
  EXPECT_EQ(p.lifts[0].to, 204 * MiB);
}

// A probe over files: limits and usages as the tests set them.
class FileProbe final : public MemoryProbe {
 public:
  std::vector<MemoryLimit> limits_of(pid_t) override { return {}; }
  fs::path memory_cgroup(pid_t) override { return {}; }
  std::vector<MemoryLimit> limits_above(const std::string&, fs::path&, std::string&) override { return {}; }
  std::uint64_t host_available() override { return 0; }
  std::uint64_t used(const fs::path& cg) override {
    if (!fs::exists(cg)) throw Error(Code::NotFound, "gone");
    return usage[cg];
  }
  void write_limit(const fs::path& file, std::uint64_t v) override {
    if (!fs::exists(file.parent_path())) throw Error(Code::NotFound, "gone");
    if (fail_at == file) throw Error(Code::Internal, "write " + file.string() + ": Device or resource busy");
    write_file_atomic(file, std::to_string(v));
    writes.push_back(file.filename().string() + "=" + std::to_string(v));
  }
  std::uint64_t oom_kills(const fs::path&) override { return 0; }
  std::uint64_t host_oom_kills() override { return 0; }
  std::map<fs::path, std::uint64_t> usage;
  std::vector<std::string> writes;
  fs::path fail_at;
};

// Tests of this file may run at once (one process each): a directory of this process's own.
fs::path scratch(const std::string& what) {
  return fs::temp_directory_path() / ("nvproxy-staging-" + what + "-" + std::to_string(::getpid()));
}

// A tree of cgroup directories under a scratch directory, each with its memory.max, a probe over
// it, and where the lift's record goes.
class LimitLiftTest : public ::testing::Test {
 protected:
  // Makes REL with memory.max at `limit`; the change that lifts it to `to`.
  LimitChange cgroup(const std::string& rel, std::uint64_t limit, std::uint64_t to) {
    fs::create_directories(d_.path() / rel);
    write_file_atomic(d_.path() / rel / "memory.max", std::to_string(limit));
    return {.file = d_.path() / rel / "memory.max", .from = limit, .to = to, .cgroup = d_.path() / rel};
  }
  LimitLift lift(std::vector<LimitChange> changes) {
    return {probe_, std::move(changes), record_, log_, "test", std::chrono::milliseconds(0)};
  }
  std::string limit_of(const std::string& rel) { return read_file(d_.path() / rel / "memory.max"); }

  ScratchDir d_{scratch("lift")};
  FileProbe probe_;
  Logger log_{0};
  fs::path record_ = d_.path() / "record.json";
};

TEST_F(LimitLiftTest, LiftsRecordsAndPutsBack) {
  auto c = cgroup("pod/c", 100, 1000);
  auto pod = cgroup("pod", 200, 1100);
  {
    LimitLift l = lift({c, pod});
    EXPECT_EQ(limit_of("pod/c"), "1000");
    EXPECT_EQ(limit_of("pod"), "1100");
    EXPECT_TRUE(fs::exists(record_));
  }
  EXPECT_EQ(limit_of("pod/c"), "100");
  EXPECT_EQ(limit_of("pod"), "200");
  EXPECT_FALSE(fs::exists(record_));
  // Put back in reverse order.
  EXPECT_EQ(probe_.writes, (std::vector<std::string>{"memory.max=1000", "memory.max=1100", "memory.max=200", "memory.max=100"}));
}

TEST_F(LimitLiftTest, NeverPutsBackBelowTheUsage) {
  auto c = cgroup("c", 100, 1000);
  probe_.usage[c.cgroup] = 500;  // the staging not freed yet
  LimitLift l = lift({c});
  PutBack pb = l.put_back();
  EXPECT_EQ(limit_of("c"), "1000");
  ASSERT_EQ(pb.left.size(), 1u);
  EXPECT_NE(pb.left[0].find("still uses"), std::string::npos) << pb.left[0];
  EXPECT_TRUE(fs::exists(record_)) << "what is left lifted stays in the record";
  // A later shim (or delete) puts it back once the usage fell.
  probe_.usage[c.cgroup] = 50;
  PutBack later = put_back_recorded(probe_, record_, log_, "delete");
  EXPECT_EQ(later.restored.size(), 1u);
  EXPECT_EQ(limit_of("c"), "100");
  EXPECT_FALSE(fs::exists(record_));
}

TEST_F(LimitLiftTest, AFailedLiftUndoesTheOnesBefore) {
  auto c = cgroup("pod/c", 100, 1000);
  auto pod = cgroup("pod", 200, 1100);
  probe_.fail_at = pod.file;
  EXPECT_THROW(lift({c, pod}), Error);
  EXPECT_EQ(limit_of("pod/c"), "100");
  EXPECT_FALSE(fs::exists(record_));
}

TEST_F(LimitLiftTest, AGoneCgroupIsNotAnError) {
  auto c = cgroup("c", 100, 1000);
  LimitLift l = lift({c});
  fs::remove_all(c.cgroup);
  PutBack pb = l.put_back();
  EXPECT_TRUE(pb.left.empty());
  EXPECT_FALSE(fs::exists(record_));
}

TEST(HostReservations, SharedAndReleased) {
  ScratchDir d(scratch("account"));
  HostReservations acc(d.path() / "staging.json");
  auto first = acc.reserve("a", "checkpoint", [](std::uint64_t others, const auto&) -> std::optional<std::uint64_t> {
    EXPECT_EQ(others, 0u);
    return 100;
  });
  ASSERT_TRUE(first.held());
  // Another container of this shim sees it (entries are per container and shim).
  auto others = acc.others("b");
  ASSERT_EQ(others.size(), 1u);
  EXPECT_EQ(others[0].container, "a");
  EXPECT_EQ(others[0].bytes, 100u);
  auto second = acc.reserve("b", "restore", [](std::uint64_t held, const auto& by) -> std::optional<std::uint64_t> {
    EXPECT_EQ(held, 100u);
    EXPECT_EQ(by.size(), 1u);
    return std::nullopt;
  });
  EXPECT_FALSE(second.held());
  first.release();
  EXPECT_TRUE(acc.others("b").empty());
}

TEST(HostReservations, AnUnusableAccountDoesNotStopTheStaging) {
  HostReservations bad("/proc/self/nonexistent/staging.json");  // cannot be created
  StagingPlan plan = plan_staging(bill_of(100 * MiB, {}), StagingMode::Lift, "checkpoint");
  ASSERT_GT(plan.reserve, 0u);
  Logger log(0);
  StagingHold h;
  EXPECT_NO_THROW(h = hold_staging(plan, bill_of(100 * MiB, {}), {.reservations = &bad}, "c", "checkpoint", log));
  EXPECT_FALSE(h.reservation.held());
}

TEST(HostReservations, ALockHeldTooLongIsNotWaitedOut) {
  ScratchDir d(scratch("account-lock"));
  HostReservations acc(d.path() / "staging.json");
  UniqueFd held(::open((d.path() / "staging.json.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  ASSERT_TRUE(held);
  ASSERT_EQ(::flock(held.get(), LOCK_EX), 0);  // another open file description: a shim that stopped
  try {
    acc.others("c");
    FAIL() << "the account was read under another's lock";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::DeadlineExceeded) << e.what();
  }
}

TEST(HostReservations, ADeadShimsEntryDoesNotCount) {
  ScratchDir d(scratch("account"));
  write_file_atomic(d.path() / "staging.json",
                    R"([{"shim": 999999999, "shim_start": 1, "container": "x", "what": "checkpoint", "bytes": 1000}])");
  HostReservations acc(d.path() / "staging.json");
  EXPECT_TRUE(acc.others("y").empty());
}

TEST(MemoryProbe, ReadsV2LimitsUpToTheRoot) {
  ScratchDir d(scratch("cg"));
  fs::path root = d.path() / "sys";
  fs::create_directories(root / "kubepods/pod1/c1");
  write_file_atomic(root / "cgroup.controllers", "memory");
  auto set = [&](const fs::path& dir, const std::string& max, const std::string& cur, const std::string& inactive) {
    write_file_atomic(dir / "memory.max", max);
    write_file_atomic(dir / "memory.high", "max\n");
    write_file_atomic(dir / "memory.current", cur);
    write_file_atomic(dir / "memory.stat", "anon 1\ninactive_file " + inactive + "\nactive_file 9\n");
  };
  set(root / "kubepods", "max\n", "900", "0");
  set(root / "kubepods/pod1", "8000\n", "700", "100");
  set(root / "kubepods/pod1/c1", "6000\n", "500", "50");
  fs::create_directories(d.path() / "proc/42");
  write_file_atomic(d.path() / "proc/42/cgroup", "0::/kubepods/pod1/c1\n");
  HostMemoryProbe probe(d.path() / "meminfo", root, d.path() / "proc");
  auto limits = probe.limits_of(42);
  ASSERT_EQ(limits.size(), 2u);
  EXPECT_EQ(limits[0].cgroup, root / "kubepods/pod1/c1");
  EXPECT_EQ(limits[0].limit, 6000u);
  EXPECT_EQ(limits[0].headroom(), 6000u - 450u);
  EXPECT_EQ(limits[1].cgroup, root / "kubepods/pod1");
  EXPECT_EQ(limits[1].headroom(), 8000u - 600u);
  write_file_atomic(d.path() / "meminfo", "MemTotal:  100 kB\nMemFree:  10 kB\nMemAvailable:   2048 kB\n");
  EXPECT_EQ(probe.host_available(), 2048u * 1024);
}

TEST(MemoryProbe, V1ReadsTheMemoryHierarchyWithMemsw) {
  ScratchDir d(scratch("cg"));
  fs::path root = d.path() / "sys";
  fs::path c = root / "memory/default/c1";
  fs::create_directories(c);
  write_file_atomic(c / "memory.limit_in_bytes", "104857600\n");
  write_file_atomic(c / "memory.memsw.limit_in_bytes", "209715200\n");
  write_file_atomic(c / "memory.usage_in_bytes", "1000\n");
  write_file_atomic(c / "memory.stat", "cache 5\ntotal_inactive_file 100\n");
  write_file_atomic(root / "memory/default/memory.limit_in_bytes", "9223372036854771712\n");
  fs::create_directories(d.path() / "proc/7");
  write_file_atomic(d.path() / "proc/7/cgroup", "5:memory:/default/c1\n1:name=systemd:/x\n");
  HostMemoryProbe probe(d.path() / "meminfo", root, d.path() / "proc");
  auto limits = probe.limits_of(7);
  ASSERT_EQ(limits.size(), 1u) << "the namespace's cgroup has no limit";
  EXPECT_EQ(limits[0].file, "memory.limit_in_bytes");
  EXPECT_EQ(limits[0].swap_limit, 209715200u);
  EXPECT_EQ(limits[0].used(), 900u);
}

TEST(MemoryProbe, CgroupsPathsOfSystemdAndCgroupfs) {
  EXPECT_EQ(cgroup_relative_path("/kubepods/pod1/c1"), fs::path("/kubepods/pod1/c1"));
  EXPECT_EQ(cgroup_relative_path("kubepods-burstable-pod1.slice:cri-containerd:abc"),
            fs::path("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/cri-containerd-abc.scope"));
  EXPECT_THROW(cgroup_relative_path("nonsense"), Error);
}

TEST(MemoryProbe, OomCountsNameTheCause) {
  ScratchDir d(scratch("cg"));
  fs::path root = d.path() / "sys";
  fs::create_directories(root / "c");
  write_file_atomic(root / "c/memory.events", "low 0\nhigh 0\nmax 3\noom 1\noom_kill 0\n");
  fs::create_directories(d.path() / "proc");
  write_file_atomic(d.path() / "proc/vmstat", "nr_free_pages 5\noom_kill 2\n");
  HostMemoryProbe probe(d.path() / "meminfo", root, d.path() / "proc");
  OomBaseline b = oom_baseline(probe, root / "c");
  EXPECT_EQ(oom_cause(probe, b), "");
  write_file_atomic(root / "c/memory.events", "low 0\nhigh 0\nmax 3\noom 2\noom_kill 1\n");
  EXPECT_NE(oom_cause(probe, b).find("oom_kill 0 -> 1 in " + (root / "c").string()), std::string::npos);
}

TEST(MemoryProbe, AKillAtThePodsLimitIsNamedWhenTheContainersCgroupIsGone) {
  ScratchDir d(scratch("cg"));
  fs::path root = d.path() / "sys";
  fs::create_directories(root / "pod/c");
  write_file_atomic(root / "pod/c/memory.events", "oom_kill 0\n");
  write_file_atomic(root / "pod/memory.events", "oom_kill 4\n");
  fs::create_directories(d.path() / "proc");
  write_file_atomic(d.path() / "proc/vmstat", "oom_kill 9\n");
  HostMemoryProbe probe(d.path() / "meminfo", root, d.path() / "proc");
  OomBaseline b = oom_baseline(probe, root / "pod/c", {root / "pod/c", root / "pod"});
  EXPECT_EQ(oom_cause(probe, b), "");
  fs::remove_all(root / "pod/c");  // runsc's delete took the sandbox's cgroup with it
  write_file_atomic(root / "pod/memory.events", "oom_kill 5\n");
  write_file_atomic(d.path() / "proc/vmstat", "oom_kill 10\n");
  const std::string cause = oom_cause(probe, b);
  EXPECT_NE(cause.find("in or below " + (root / "pod").string()), std::string::npos) << cause;
  EXPECT_NE(cause.find("oom_kill 4 -> 5"), std::string::npos) << cause;
}

// A gVisor sandbox's restore: runsc keeps the memory file inside its state file, so the image has no
// page files to count; what the sandbox's cgroup held at the checkpoint (its record) is billed.
TEST(RestoreStaging, ASandboxIsBilledForWhatItHeldAtItsCheckpoint) {
  ScratchDir d(scratch("sbx"));
  fs::path root = d.path() / "sys";
  fs::create_directories(root / "pod");
  write_file_atomic(root / "cgroup.controllers", "memory\n");
  write_file_atomic(root / "pod/memory.max", std::to_string(4096 * MiB) + "\n");
  write_file_atomic(root / "pod/memory.current", "0\n");
  write_file_atomic(root / "pod/memory.stat", "inactive_file 0\n");
  write_file_atomic(root / "pod/memory.events", "oom_kill 0\n");
  write_file_atomic(d.path() / "meminfo", "MemAvailable: " + std::to_string(64 * 1024 * 1024) + " kB\n");
  fs::create_directories(d.path() / "proc");
  write_file_atomic(d.path() / "proc/vmstat", "oom_kill 0\n");
  fs::create_directories(d.path() / "bundle");
  fs::create_directories(d.path() / "image");
  write_file_atomic(d.path() / "image/checkpoint.img", std::string(4096, 'x'));
  const std::string spec =
      R"({"linux":{"cgroupsPath":"/pod/c","resources":{"memory":{"limit":)" + std::to_string(192 * MiB) + "}}}}";
  write_file_atomic(d.path() / "bundle/config.json", spec);
  HostMemoryProbe probe(d.path() / "meminfo", root, d.path() / "proc");
  Logger log(-1);
  ImageRecord rec{.container = "s", .sandbox = "runsc", .cuda_processes = 1, .sandbox_device_bytes = 256 * MiB};
  rec.sandbox_memory_bytes = 384 * MiB;
  RestoreStagingInput in{.container = "s",
                         .bundle = d.path() / "bundle",
                         .image = d.path() / "image",
                         .record = &rec,
                         .mode = StagingMode::Lift,
                         .margin = 64 * MiB};
  {
    RestoreStaging staging(in, probe, nullptr, log);
    auto lifted = nlohmann::json::parse(read_file(d.path() / "bundle/config.json"));
    // 256 MiB staged + the other 128 MiB the sandbox held + 64 MiB margin; the staging alone was 320.
    EXPECT_EQ(lifted["linux"]["resources"]["memory"]["limit"].get<std::uint64_t>(), (384 + 64) * MiB);
    staging.spec_back();
    EXPECT_EQ(read_file(d.path() / "bundle/config.json"), spec);
    // The sandbox killed at the pod's limit: said with the bill.
    write_file_atomic(root / "pod/memory.events", "oom_kill 1\n");
    const std::string cause = staging.oom_cause_now();
    EXPECT_EQ(cause.rfind("the sandbox was OOM-killed during its restore: ", 0), 0u) << cause;
    EXPECT_NE(cause.find("the restore was billed 448.0 MiB"), std::string::npos) << cause;
    EXPECT_NE(cause.find(" -> 448.0 MiB"), std::string::npos) << cause;
  }
  // Under staging_memory: refuse the same bill is refused up front, the spec untouched.
  in.mode = StagingMode::Refuse;
  EXPECT_THROW(RestoreStaging(in, probe, nullptr, log), Error);
  EXPECT_EQ(read_file(d.path() / "bundle/config.json"), spec);
}

TEST(RestoreStaging, ImagePagesAreCounted) {
  ScratchDir d(scratch("img"));
  write_file_atomic(d.path() / "pages-1.img", std::string(4096, 'x'));
  write_file_atomic(d.path() / "pages-2.img", std::string(8192, 'x'));
  write_file_atomic(d.path() / "pagemap-1.img", std::string(100, 'x'));
  EXPECT_EQ(image_page_bytes(d.path()), 12288u);
}

}  // namespace
}  // namespace nvproxy::checkpoint
