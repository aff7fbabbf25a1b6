#include "checkpoint/image/image_record.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "common/error.h"

using namespace nvproxy;
using namespace nvproxy::checkpoint;

namespace {

// What shim 0.3.0 wrote after a runc checkpoint of a CUDA parent and child (the shape of
// checkpoint_flow's record then: no "version", the GPU facts under "gpu").
constexpr const char* k030Runc = R"({"container":"sglang","cuda_processes":2,
 "cuda_pids":[{"pid":1,"name":"python3"},{"pid":7,"name":"python3"}],
 "gpu":{"driver_version":"580.159.04","driver_branch":"580",
        "devices":[{"index":0,"uuid":"GPU-79f8","name":"NVIDIA H200","memory_total":150754820096,
                    "memory_free":140000000000,"memory_used":10754820096}],
        "processes":[{"pid":1,"host_pid":4101,"name":"python3","gpus":[{"uuid":"GPU-79f8","used_bytes":1073741824}]},
                     {"pid":7,"host_pid":4130,"name":"python3","gpus":[{"uuid":"GPU-79f8","used_bytes":536870912}]}]}})";
// ... after a runsc checkpoint (sandbox pids, no GPU facts).
constexpr const char* k030Runsc = R"({"container":"g1","cuda_processes":1,"sandbox":"runsc",
 "cuda_pids":[{"pid":1,"name":"python3"}],
 "gpu_error":"taken inside a gVisor sandbox: NVML there cannot tell the sandbox's processes apart"})";
// ... with a CUDA process outside the init's tree that configuration let go.
constexpr const char* k030Lost = R"({"container":"c1","cuda_processes":1,"cuda_pids":[{"pid":1,"name":"fake_cuda_app"}],
 "cuda_not_restored":[{"pid":12,"name":"fake_cuda_app"}],"gpu_error":"cannot load the NVML library"})";

class TempDir {
 public:
  TempDir() : path_(std::filesystem::temp_directory_path() / ("nvproxy-record-" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace

TEST(ImageRecord, ReadsTheRunc030Record) {
  ImageRecord r = image_record_from_json(nlohmann::json::parse(k030Runc));
  EXPECT_EQ(r.version, 0);
  EXPECT_EQ(r.container, "sglang");
  EXPECT_TRUE(r.sandbox.empty());
  EXPECT_EQ(r.cuda_processes, 2);
  ASSERT_EQ(r.cuda_pids.size(), 2U);
  EXPECT_EQ(r.cuda_pids[1], (ImageProcess{.pid = 7, .name = "python3"}));
  ASSERT_TRUE(r.gpu);
  EXPECT_EQ(r.gpu->driver_version, "580.159.04");
  ASSERT_EQ(r.gpu->processes.size(), 2U);
  EXPECT_EQ(r.gpu->processes[0].id.host_pid, 4101);
  EXPECT_EQ(r.gpu->processes[1].gpus.at(0).used_bytes, 536870912U);
}

TEST(ImageRecord, ReadsTheRunsc030Record) {
  ImageRecord r = image_record_from_json(nlohmann::json::parse(k030Runsc));
  EXPECT_EQ(r.sandbox, "runsc");
  EXPECT_TRUE(r.has_cuda());
  EXPECT_FALSE(r.gpu);
  EXPECT_NE(r.gpu_error.find("gVisor"), std::string::npos);
}

TEST(ImageRecord, ReadsProcessesNotRestored) {
  ImageRecord r = image_record_from_json(nlohmann::json::parse(k030Lost));
  ASSERT_EQ(r.cuda_not_restored.size(), 1U);
  EXPECT_EQ(r.cuda_not_restored[0].pid, 12);
  EXPECT_EQ(r.cuda_pids.size(), 1U);
}

TEST(ImageRecord, RoundTripsAndWritesItsVersion) {
  ImageRecord r = image_record_from_json(nlohmann::json::parse(k030Runc));
  r.version = ImageRecord::kVersion;
  nlohmann::json j = to_json(r);
  EXPECT_EQ(j.at("version"), ImageRecord::kVersionWithoutReleased) << "nothing released: a 0.3.0 shim can restore it";
  ImageRecord back = image_record_from_json(j);
  EXPECT_EQ(back.cuda_pids, r.cuda_pids);
  EXPECT_EQ(to_json(back), j);
  // 0.3.0's reader looked at these keys only: a 0.3.0 shim still restores what this one writes.
  EXPECT_EQ(j.at("cuda_processes"), 2);
  EXPECT_EQ(j.at("cuda_pids").at(0).at("name"), "python3");
}

// Released files need the release plugin at restore: the record says so with a version that a shim
// without it refuses.
// A sandbox's device memory (what its restore bills) round-trips; older records read as unknown.
TEST(ImageRecord, ASandboxsDeviceMemoryRoundTrips) {
  ImageRecord r{.container = "llm", .sandbox = "runsc", .cuda_processes = 1, .cuda_pids = {{.pid = 1, .name = "python3"}}};
  r.sandbox_device_bytes = 10737418240ULL;
  nlohmann::json j = to_json(r);
  EXPECT_EQ(j.at("sandbox_device_bytes"), 10737418240ULL);
  EXPECT_EQ(image_record_from_json(j).sandbox_device_bytes, 10737418240ULL);
  EXPECT_EQ(image_record_from_json(nlohmann::json::parse(k030Runsc)).sandbox_device_bytes, 0U);
}

TEST(ImageRecord, ReleasedProcessesRoundTripAsVersion2) {
  ImageRecord r = image_record_from_json(nlohmann::json::parse(k030Runc));
  r.released.push_back({.pid = 7, .name = "pt_data_worker", .from = 1, .fds = {5, 6, 9}});
  nlohmann::json j = to_json(r);
  EXPECT_EQ(j.at("version"), 2);
  ImageRecord back = image_record_from_json(j);
  EXPECT_EQ(back.released, r.released);
  EXPECT_EQ(to_json(back), j);
}

TEST(ImageRecord, NoCudaWithoutProcesses) {
  ImageRecord r = image_record_from_json(nlohmann::json::parse(R"({"container":"c","cuda_processes":0,"cuda_pids":[]})"));
  EXPECT_FALSE(r.has_cuda());
}

TEST(ImageRecord, MalformedRecordsAreRefusedNamingWhat) {
  auto refused = [](const char* text) -> std::string {
    try {
      image_record_from_json(nlohmann::json::parse(text));
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Code::InvalidArgument) << text;
      return e.what();
    }
    ADD_FAILURE() << "accepted: " << text;
    return "";
  };
  EXPECT_NE(refused(R"([1,2])").find("not a JSON object"), std::string::npos);
  EXPECT_NE(refused(R"({"cuda_processes":1,"cuda_pids":{"pid":1}})").find("cuda_pids"), std::string::npos);
  EXPECT_NE(refused(R"({"cuda_processes":1,"cuda_pids":[{"name":"x"}]})").find("has no pid"), std::string::npos);
  EXPECT_NE(refused(R"({"cuda_processes":"two"})").find("\"cuda_processes\" is not an integer"), std::string::npos);
  // Found by fuzz_image_record: a number too big for an integer is a float, and converting it was
  // undefined behaviour; every integer field is range-checked.
  EXPECT_NE(refused(R"({"cuda_processes":2111111111111111111111111111111})").find("\"cuda_processes\" is not an integer"),
            std::string::npos);
  EXPECT_NE(refused(R"({"cuda_processes":4294967296})").find("\"cuda_processes\" is out of range"), std::string::npos);
  EXPECT_NE(refused(R"({"version":1.5})").find("\"version\""), std::string::npos);
  EXPECT_NE(refused(R"({"cuda_processes":1,"cuda_pids":[{"pid":1e300}]})").find("cuda_pids.pid"), std::string::npos);
  EXPECT_NE(refused(R"({"released":[{"pid":1,"fds":[18446744073709551615]}]})").find("released.fds"), std::string::npos);
  EXPECT_NE(refused(R"({"cuda_processes":1,"gpu":{"devices":[]}})").find("GPU record"), std::string::npos);
  EXPECT_NE(refused(R"({"version":99,"cuda_processes":1})").find("newer shim"), std::string::npos);
}

TEST(ImageRecord, FileRoundTripAndAbsence) {
  TempDir d;
  EXPECT_FALSE(read_image_record(d.path()));  // another runtime's image: no record, no error
  ImageRecord r{.container = "c1", .cuda_processes = 1, .cuda_pids = {{.pid = 1, .name = "python3"}}};
  write_image_record(d.path(), r);
  auto back = read_image_record(d.path());
  ASSERT_TRUE(back);
  EXPECT_EQ(back->cuda_pids, r.cuda_pids);
  std::ofstream(d.path() / ImageRecord::kFileName) << "{not json";
  try {
    read_image_record(d.path());
    FAIL() << "a corrupt record was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find((d.path() / ImageRecord::kFileName).string()), std::string::npos) << e.what();
  }
}
