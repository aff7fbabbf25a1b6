// The restore preflight's comparison (record of the checkpoint vs. this host's GPU facts), the
// record's JSON, and the facts as the helper program gets them from (fake) NVML.
#include "checkpoint/preflight/restore_preflight.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "checkpoint/programs/cuda_helper_client.h"
#include "checkpoint/shared/gpu_usage.h"
#include "common/error.h"
#include "fake_gpu.h"

using namespace nvproxy;
using namespace nvproxy::checkpoint;
using namespace nvproxy::checkpoint::testing;

namespace {

constexpr std::uint64_t kMiB = 1ULL << 20;
constexpr std::uint64_t kGiB = 1ULL << 30;

GpuDeviceFacts gpu(unsigned index, const std::string& uuid, const std::string& name, std::uint64_t free,
                   std::uint64_t total = 140 * kGiB) {
  return {.index = index, .uuid = uuid, .name = name, .memory_total = total, .memory_free = free, .memory_used = total - free};
}

RecordedProcess proc(pid_t pid, const std::string& name, std::vector<GpuProcessUse> gpus) {
  return {.id = {.host_pid = pid + 1000, .pid = pid, .name = name}, .gpus = std::move(gpus)};
}

// One python3 (pid 41) with 4.7 GiB on an H200, driver 580.159.04.
GpuRecord h200_record() {
  return {.driver_version = "580.159.04",
          .devices = {gpu(0, "GPU-79f8aa", "NVIDIA H200", 100 * kGiB)},
          .processes = {proc(41, "python3", {{.uuid = "GPU-79f8aa", .used_bytes = 4813 * kMiB}})}};
}

GpuHostFacts host(std::string driver, std::vector<GpuDeviceFacts> devices) {
  return {.driver_version = std::move(driver), .devices = std::move(devices)};
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST(RestorePreflight, SameHostIsAccepted) {
  RestoreCheck c = check_restore(h200_record(), host("580.159.04", {gpu(0, "GPU-79f8aa", "NVIDIA H200", 130 * kGiB)}));
  EXPECT_TRUE(c.refusals.empty()) << c.refusals.front().message;
  EXPECT_TRUE(c.warnings.empty());
  EXPECT_EQ(c.placement.at("GPU-79f8aa"), 0u);
}

TEST(RestorePreflight, OtherModelIsRefusedNamingProcessGpuAndHost) {
  RestoreCheck c =
      check_restore(h200_record(), host("580.159.04", {gpu(0, "GPU-0c1d", "NVIDIA A100-SXM4-80GB", 79 * kGiB, 80 * kGiB)}));
  ASSERT_EQ(c.refusals.size(), 1u);
  const auto& r = c.refusals[0];
  EXPECT_EQ(r.kind, "model");
  EXPECT_EQ(r.pids, std::vector<pid_t>{41});
  EXPECT_EQ(r.gpu_name, "NVIDIA H200");
  EXPECT_EQ(r.message,
            "pid 41 (python3) was checkpointed on \"NVIDIA H200\" (GPU-79f8aa) with 4.7 GiB; this host's GPU 0 is "
            "\"NVIDIA A100-SXM4-80GB\" (GPU-0c1d), no \"NVIDIA H200\"");
  EXPECT_EQ(refusal_text("c1", c.refusals), "restore of \"c1\" refused: " + r.message);
}

TEST(RestorePreflight, HostWithoutGpusIsRefused) {
  RestoreCheck c = check_restore(h200_record(), host("580.159.04", {}));
  ASSERT_EQ(c.refusals.size(), 1u);
  EXPECT_EQ(c.refusals[0].kind, "model");
  EXPECT_TRUE(has(c.refusals[0].message, "this host has no GPU")) << c.refusals[0].message;
}

TEST(RestorePreflight, OtherDriverBranchIsRefusedSameBranchIsNot) {
  GpuHostFacts h = host("570.86.15", {gpu(0, "GPU-79f8aa", "NVIDIA H200", 130 * kGiB)});
  RestoreCheck c = check_restore(h200_record(), h);
  ASSERT_EQ(c.refusals.size(), 1u);
  EXPECT_EQ(c.refusals[0].kind, "driver");
  EXPECT_TRUE(has(c.refusals[0].message, "pid 41 (python3) was checkpointed with driver 580.159.04 (branch 580)"))
      << c.refusals[0].message;
  EXPECT_TRUE(has(c.refusals[0].message, "this host's driver is 570.86.15 (branch 570)")) << c.refusals[0].message;
  h.driver_version = "580.65.06";
  EXPECT_TRUE(check_restore(h200_record(), h).refusals.empty());
}

TEST(RestorePreflight, TooLittleFreeMemoryForTheSumIsRefused) {
  GpuRecord rec = h200_record();
  rec.processes.push_back(proc(42, "worker", {{.uuid = "GPU-79f8aa", .used_bytes = 4813 * kMiB}}));
  // 6 GiB free holds either process, not both.
  RestoreCheck c = check_restore(rec, host("580.159.04", {gpu(0, "GPU-79f8aa", "NVIDIA H200", 6 * kGiB)}));
  ASSERT_EQ(c.refusals.size(), 1u);
  const auto& r = c.refusals[0];
  EXPECT_EQ(r.kind, "memory");
  EXPECT_EQ(r.pids, (std::vector<pid_t>{41, 42}));
  EXPECT_EQ(r.message,
            "pid 41 (python3) with 4.7 GiB and pid 42 (worker) with 4.7 GiB were checkpointed on \"NVIDIA H200\" "
            "(GPU-79f8aa) (9.4 GiB in all); this host's GPU 0 \"NVIDIA H200\" (GPU-79f8aa) has 6.0 GiB free of 140.0 GiB");
  EXPECT_TRUE(check_restore(rec, host("580.159.04", {gpu(0, "GPU-79f8aa", "NVIDIA H200", 10 * kGiB)})).refusals.empty());
}

TEST(RestorePreflight, OtherUuidOfTheSameModelIsAllowedWithAWarning) {
  RestoreCheck c = check_restore(h200_record(), host("580.159.04", {gpu(0, "GPU-aaaa", "NVIDIA A100", 70 * kGiB),
                                                                    gpu(1, "GPU-bbbb", "NVIDIA H200", 130 * kGiB)}));
  EXPECT_TRUE(c.refusals.empty()) << c.refusals.front().message;
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_TRUE(has(c.warnings[0], "restoring onto its GPU 1 \"NVIDIA H200\" (GPU-bbbb), the same model")) << c.warnings[0];
  EXPECT_EQ(c.placement.at("GPU-79f8aa"), 1u);
}

TEST(RestorePreflight, RecordedGpusNeedAsManyOfTheModel) {
  GpuRecord rec = h200_record();
  rec.devices.push_back(gpu(1, "GPU-second", "NVIDIA H200", 100 * kGiB));
  rec.processes.push_back(proc(57, "rank1", {{.uuid = "GPU-second", .used_bytes = 2 * kGiB}}));
  GpuHostFacts h = host("580.159.04", {gpu(0, "GPU-79f8aa", "NVIDIA H200", 130 * kGiB)});
  RestoreCheck c = check_restore(rec, h);
  ASSERT_EQ(c.refusals.size(), 1u);
  EXPECT_EQ(c.refusals[0].kind, "missing");
  EXPECT_EQ(c.refusals[0].pids, std::vector<pid_t>{57});
  EXPECT_TRUE(has(c.refusals[0].message, "pid 57 (rank1) was checkpointed on \"NVIDIA H200\" (GPU-second) with 2.0 GiB"))
      << c.refusals[0].message;
  EXPECT_TRUE(has(c.refusals[0].message,
                  "this host has 1 \"NVIDIA H200\" (GPU 0 \"NVIDIA H200\" (GPU-79f8aa)) for the "
                  "checkpoint's 2"))
      << c.refusals[0].message;
  h.devices.push_back(gpu(1, "GPU-other", "NVIDIA H200", 130 * kGiB));
  c = check_restore(rec, h);
  EXPECT_TRUE(c.refusals.empty());
  EXPECT_EQ(c.placement.at("GPU-79f8aa"), 0u) << "the same UUID is kept";
  EXPECT_EQ(c.placement.at("GPU-second"), 1u);
}

TEST(RestorePreflight, SameUuidIsPreferredOverMoreFreeMemory) {
  GpuHostFacts h =
      host("580.159.04", {gpu(0, "GPU-big", "NVIDIA H200", 139 * kGiB), gpu(1, "GPU-79f8aa", "NVIDIA H200", 5 * kGiB)});
  RestoreCheck c = check_restore(h200_record(), h);
  EXPECT_TRUE(c.refusals.empty());
  EXPECT_TRUE(c.warnings.empty());
  EXPECT_EQ(c.placement.at("GPU-79f8aa"), 1u);
}

TEST(RestorePreflight, SeveralFindingsAreAllReported) {
  RestoreCheck c = check_restore(h200_record(), host("550.54.15", {gpu(0, "GPU-x", "Tesla T4", 15 * kGiB)}));
  ASSERT_EQ(c.refusals.size(), 2u);
  EXPECT_EQ(c.refusals[0].kind, "driver");
  EXPECT_EQ(c.refusals[1].kind, "model");
  std::string text = refusal_text("c1", c.refusals);
  EXPECT_TRUE(has(text, "branch 550")) << text;
  EXPECT_TRUE(has(text, "\"Tesla T4\"")) << text;
}

TEST(RestorePreflight, ProcessesWithoutRecordedGpusOnlyNeedTheDriverBranch) {
  GpuRecord rec{.driver_version = "580.95.05", .processes = {proc(7, "app", {})}};
  EXPECT_TRUE(check_restore(rec, host("580.95.05", {})).refusals.empty());
  EXPECT_EQ(check_restore(rec, host("575.51.03", {})).refusals.size(), 1u);
}

TEST(RestorePreflight, UnknownMemoryCountsAsNothing) {
  GpuRecord rec = h200_record();
  rec.processes[0].gpus[0].used_bytes.reset();
  RestoreCheck c = check_restore(rec, host("580.159.04", {gpu(0, "GPU-79f8aa", "NVIDIA H200", 0)}));
  EXPECT_TRUE(c.refusals.empty());
  c = check_restore(rec, host("580.159.04", {gpu(0, "GPU-z", "NVIDIA L4", 0)}));
  ASSERT_EQ(c.refusals.size(), 1u);
  EXPECT_TRUE(has(c.refusals[0].message, "pid 41 (python3) was checkpointed on \"NVIDIA H200\" (GPU-79f8aa);"))
      << c.refusals[0].message;
}

TEST(RestorePreflight, NvmlUnavailableNamesProcessesGpusAndTheError) {
  RestoreRefusal r = nvml_unavailable(h200_record(), "cannot load NVML \"libnvidia-ml.so.1\": not found");
  EXPECT_EQ(r.kind, "nvml");
  EXPECT_EQ(r.message,
            "pid 41 (python3) was checkpointed with CUDA state on \"NVIDIA H200\" (GPU-79f8aa) (driver 580.159.04); "
            "this host cannot check its GPUs: cannot load NVML \"libnvidia-ml.so.1\": not found");
}

TEST(RestorePreflight, RecordRoundTripsThroughJson) {
  GpuHostFacts at_checkpoint{
      .driver_version = "580.159.04",
      .devices = {gpu(0, "GPU-79f8aa", "NVIDIA H200", 100 * kGiB), gpu(1, "GPU-unused", "NVIDIA H200", 140 * kGiB)},
      .processes = {{1041, {{.uuid = "GPU-79f8aa", .used_bytes = 4813 * kMiB}}},
                    {1099, {{.uuid = "GPU-79f8aa", .used_bytes = kGiB}}}}};
  GpuRecord rec = make_gpu_record(
      at_checkpoint, {{.host_pid = 1041, .pid = 41, .name = "python3"}, {.host_pid = 1050, .pid = 50, .name = "idle"}});
  ASSERT_EQ(rec.processes.size(), 2u) << "only the given processes; 1099 is not one of them";
  ASSERT_EQ(rec.devices.size(), 1u) << "only the devices they used";
  EXPECT_TRUE(rec.processes[1].gpus.empty());
  nlohmann::json j = to_json(rec);
  EXPECT_EQ(j["driver_branch"], "580");
  EXPECT_EQ(j["processes"][0]["gpus"][0]["used_bytes"], 4813 * kMiB);
  GpuRecord back = gpu_record_from_json(nlohmann::json::parse(j.dump()));
  EXPECT_EQ(to_json(back), j);
  EXPECT_EQ(back.processes[0].id.name, "python3");
  EXPECT_EQ(back.processes[0].id.host_pid, 1041);
  try {
    gpu_record_from_json(nlohmann::json{{"driver_version", "580"}, {"devices", nlohmann::json::array()}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::InvalidArgument);
    EXPECT_TRUE(has(e.what(), "processes")) << e.what();
  }
}

TEST(RestorePreflight, DiagnosticCarriesRecordHostAndRefusals) {
  GpuRecord rec = h200_record();
  GpuHostFacts h = host("580.159.04", {gpu(0, "GPU-0c1d", "NVIDIA A100", 79 * kGiB)});
  RestoreCheck c = check_restore(rec, h);
  nlohmann::json d = refusal_diagnostic("c1", rec, &h, "", c);
  EXPECT_EQ(d["verdict"], "refused");
  EXPECT_EQ(d["operation"], "restore");
  EXPECT_EQ(d["refusals"][0]["kind"], "model");
  EXPECT_EQ(d["refusals"][0]["gpu"]["name"], "NVIDIA H200");
  EXPECT_EQ(d["host"]["devices"][0]["name"], "NVIDIA A100");
  EXPECT_EQ(d["text"], refusal_text("c1", c.refusals));
  RestoreCheck none{.refusals = {nvml_unavailable(rec, "no NVML")}};
  d = refusal_diagnostic("c1", rec, nullptr, "no NVML", none);
  EXPECT_EQ(d["host_error"], "no NVML");
  EXPECT_FALSE(d.contains("host"));
}

TEST(RestorePreflight, BytesAndBranches) {
  EXPECT_EQ(format_bytes(800), "800 B");
  EXPECT_EQ(format_bytes(512 * kMiB), "512.0 MiB");
  EXPECT_EQ(format_bytes(4813 * kMiB), "4.7 GiB");
  EXPECT_EQ(driver_branch("580.159.04"), "580");
  EXPECT_EQ(driver_branch("575"), "575");
}

TEST(RestorePreflight, IdentifiesAProcessByItsNamespacePidAndComm) {
  ProcessIdentity me = identify_process(::getpid());
  EXPECT_EQ(me.host_pid, ::getpid());
  EXPECT_EQ(me.pid, ::getpid()) << "the test runs in the host's pid namespace";
  EXPECT_EQ(me.name, slurp("/proc/self/comm"));
  ProcessIdentity gone = identify_process(0x7ffffff0);
  EXPECT_EQ(gone.pid, 0x7ffffff0);
  EXPECT_TRUE(gone.name.empty());
}

// The facts through the real helper program and the fake NVML, configured as another host.
TEST(RestorePreflightNvml, HostFactsComeFromNvmlInTheHelper) {
  FakeGpu fake;
  fake.nvml("100 0 4813\n200 1\n");
  spit(fake.dir() / "nvml_model", "NVIDIA H200\nNVIDIA A100-SXM4-80GB\n");
  spit(fake.dir() / "nvml_driver", "580.159.04");
  spit(fake.dir() / "nvml_mem_total_mib", "143771");
  spit(fake.dir() / "nvml_mem_free_mib", "2048;70000");
  DirectWaiter w;
  ProcessRunner r(w);
  CheckpointConfig cfg = fake.config();
  cfg.cuda_helper = CUDA_HELPER_PATH;
  CudaTools t = make_cuda_tools(cfg, r);
  GpuHostFacts f = t.probe->host_facts();
  EXPECT_EQ(f.driver_version, "580.159.04");
  ASSERT_EQ(f.devices.size(), 2u);
  EXPECT_EQ(f.devices[0].name, "NVIDIA H200");
  EXPECT_EQ(f.devices[0].uuid, "GPU-fake-0000");
  EXPECT_EQ(f.devices[0].memory_total, 143771 * kMiB);
  EXPECT_EQ(f.devices[0].memory_free, 2048 * kMiB);
  EXPECT_EQ(f.devices[0].memory_used, (143771 - 2048) * kMiB);
  EXPECT_EQ(f.devices[1].name, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(f.devices[1].index, 1u);
  EXPECT_EQ(f.devices[1].memory_free, 70000 * kMiB);
  ASSERT_EQ(f.processes.size(), 2u);
  ASSERT_EQ(f.processes[100].size(), 1u);
  EXPECT_EQ(f.processes[100][0].uuid, "GPU-fake-0000");
  EXPECT_EQ(f.processes[100][0].used_bytes, 4813 * kMiB);
  EXPECT_EQ(f.processes[200][0].uuid, "GPU-fake-0001");
  EXPECT_EQ(f.processes[200][0].used_bytes, kGiB) << "the fake's default per process";
  EXPECT_EQ(t.probe->gpus_by_pid()[100], std::set<std::string>{"GPU-fake-0000"}) << "the old question still works";
}

TEST(RestorePreflightNvml, DefaultsAndVariablesPlayAHost) {
  FakeGpu fake;
  fake.nvml("300 0 3000\n");
  NvmlGpuUsageProbe probe(FAKE_LIBNVML_PATH);
  GpuHostFacts f = probe.host_facts();
  EXPECT_EQ(f.driver_version, "580.95.05");
  ASSERT_EQ(f.devices.size(), 1u);
  EXPECT_EQ(f.devices[0].name, "NVIDIA Fake GPU");
  EXPECT_EQ(f.devices[0].memory_total, 81920 * kMiB);
  EXPECT_EQ(f.devices[0].memory_free, (81920 - 3000) * kMiB) << "free: total minus what the processes hold";
  ::setenv("NVPROXY_FAKE_NVML_MODEL", "NVIDIA L40S", 1);
  ::setenv("NVPROXY_FAKE_NVML_DRIVER", "570.86.15", 1);
  ::setenv("NVPROXY_FAKE_NVML_UUID_PREFIX", "GPU-other-", 1);
  f = probe.host_facts();
  ::unsetenv("NVPROXY_FAKE_NVML_MODEL");
  ::unsetenv("NVPROXY_FAKE_NVML_DRIVER");
  ::unsetenv("NVPROXY_FAKE_NVML_UUID_PREFIX");
  EXPECT_EQ(f.driver_version, "570.86.15");
  EXPECT_EQ(f.devices[0].name, "NVIDIA L40S");
  EXPECT_EQ(f.devices[0].uuid, "GPU-other-0000");
  spit(fake.dir() / "nvml_model", "NVIDIA H100");
  ::setenv("NVPROXY_FAKE_NVML_MODEL", "NVIDIA L40S", 1);
  f = probe.host_facts();
  ::unsetenv("NVPROXY_FAKE_NVML_MODEL");
  EXPECT_EQ(f.devices[0].name, "NVIDIA H100") << "the file wins over the variable";
}

TEST(RestorePreflightNvml, MissingNvmlIsAFailedPrecondition) {
  DirectWaiter w;
  ProcessRunner r(w);
  CheckpointConfig cfg;
  cfg.cuda_helper = CUDA_HELPER_PATH;
  cfg.libnvml = "/nonexistent/libnvidia-ml.so.1";
  CudaTools t = make_cuda_tools(cfg, r);
  try {
    t.probe->host_facts();
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::FailedPrecondition);
    EXPECT_TRUE(has(e.what(), "/nonexistent/libnvidia-ml.so.1")) << e.what();
  }
}

// ---- restore onto other GPUs (device map) ----

namespace {

// Two H200s checkpointed: python3 (pid 41) on GPU-a, worker (pid 42) on GPU-b.
GpuRecord two_gpu_record() {
  return {.driver_version = "580.159.04",
          .devices = {gpu(0, "GPU-a", "NVIDIA H200", 100 * kGiB), gpu(1, "GPU-b", "NVIDIA H200", 100 * kGiB)},
          .processes = {proc(41, "python3", {{.uuid = "GPU-a", .used_bytes = kGiB}}),
                        proc(42, "worker", {{.uuid = "GPU-b", .used_bytes = kGiB}})}};
}

GpuHostFacts three_h200() {
  return host("580.159.04", {gpu(0, "GPU-a", "NVIDIA H200", 130 * kGiB), gpu(1, "GPU-b", "NVIDIA H200", 130 * kGiB),
                             gpu(2, "GPU-c", "NVIDIA H200", 130 * kGiB)});
}

}  // namespace

TEST(RestoreDeviceMap, VisibleGpusResolveIndicesUuidsAndAll) {
  std::vector<std::string> unknown;
  EXPECT_EQ(visible_gpus({}, three_h200(), unknown), std::nullopt);
  EXPECT_EQ(visible_gpus({"0", "all"}, three_h200(), unknown), std::nullopt);
  EXPECT_EQ(visible_gpus({"2", "GPU-a"}, three_h200(), unknown), (std::set<std::string>{"GPU-a", "GPU-c"}));
  EXPECT_TRUE(unknown.empty());
  EXPECT_EQ(visible_gpus({"7", "GPU-zz"}, three_h200(), unknown), std::set<std::string>{});
  EXPECT_EQ(unknown, (std::vector<std::string>{"7", "GPU-zz"}));
}

TEST(RestoreDeviceMap, TheSameGpusNeedNoMap) {
  RestoreCheck c = check_restore(two_gpu_record(), three_h200(), std::set<std::string>{"GPU-a", "GPU-b"});
  EXPECT_TRUE(c.refusals.empty());
  EXPECT_TRUE(c.device_map.empty());
}

TEST(RestoreDeviceMap, OneGpuMovedPairsEveryCheckpointedGpu) {
  // The container now gets GPUs b and c: a's process must move; b stays, and is paired too.
  RestoreCheck c = check_restore(two_gpu_record(), three_h200(), std::set<std::string>{"GPU-b", "GPU-c"});
  ASSERT_TRUE(c.refusals.empty()) << c.refusals.front().message;
  EXPECT_EQ(c.device_map, (DeviceMap{{"GPU-a", "GPU-c"}, {"GPU-b", "GPU-b"}}));
  EXPECT_EQ(device_map_text(c.device_map), "GPU-a=GPU-c,GPU-b=GPU-b");
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_TRUE(has(c.warnings[0], "GPU-a")) << c.warnings[0];
}

TEST(RestoreDeviceMap, ARestoreOntoOneOtherGpuIsMapped) {
  GpuRecord rec = h200_record();
  GpuHostFacts h =
      host("580.159.04", {gpu(0, "GPU-79f8aa", "NVIDIA H200", 130 * kGiB), gpu(1, "GPU-1111", "NVIDIA H200", 130 * kGiB)});
  RestoreCheck c = check_restore(rec, h, std::set<std::string>{"GPU-1111"});
  ASSERT_TRUE(c.refusals.empty()) << c.refusals.front().message;
  EXPECT_EQ(c.device_map, (DeviceMap{{"GPU-79f8aa", "GPU-1111"}}));
  EXPECT_EQ(c.placement.at("GPU-79f8aa"), 1u);
}

TEST(RestoreDeviceMap, FewerGpusThanCheckpointedIsRefused) {
  RestoreCheck c = check_restore(two_gpu_record(), three_h200(), std::set<std::string>{"GPU-c"});
  ASSERT_EQ(c.refusals.size(), 1u);
  EXPECT_EQ(c.refusals[0].kind, "missing");
  EXPECT_TRUE(has(c.refusals[0].message, "1 \"NVIDIA H200\"")) << c.refusals[0].message;
  EXPECT_TRUE(has(c.refusals[0].message, "for the checkpoint's 2")) << c.refusals[0].message;
}

TEST(RestoreDeviceMap, AnotherModelAmongTheContainersGpusIsRefused) {
  GpuHostFacts h =
      host("580.159.04", {gpu(0, "GPU-79f8aa", "NVIDIA H200", 130 * kGiB), gpu(1, "GPU-l4", "NVIDIA L4", 20 * kGiB)});
  RestoreCheck c = check_restore(h200_record(), h, std::set<std::string>{"GPU-l4"});
  ASSERT_EQ(c.refusals.size(), 1u);
  EXPECT_EQ(c.refusals[0].kind, "model");
  EXPECT_TRUE(c.device_map.empty());
}
