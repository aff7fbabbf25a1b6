// `diagnose` as operators run it: the shim's command, through the same session wiring a checkpoint uses.
#include "shim/task/diagnose_cmd.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "fake_gpu.h"

using namespace nvproxy;
using namespace nvproxy::checkpoint;
using namespace nvproxy::checkpoint::testing;

namespace {
struct Run {
  int rc;
  std::string out, err;
};
Run diagnose(const FakeGpu& gpu, std::vector<std::string> args) {
  args.insert(args.end(), {"--cuda-helper", CUDA_HELPER_PATH, "--libcuda", FAKE_LIBCUDA_PATH, "--libnvml", FAKE_LIBNVML_PATH,
                           "--device-glob", gpu.glob()});
  std::ostringstream out, err;
  int rc = nvproxy::shim::diagnose_cmd(args, out, err);
  return {rc, out.str(), err.str()};
}
}  // namespace

TEST(Diagnose, ShowsHoldersAndStatesWithoutTogglingAnything) {
  FakeGpu gpu;
  pid_t cuda = gpu.start_app();
  pid_t nvml = gpu.start_app({"--no-cuda"}, "nvidiactl");
  auto r = diagnose(gpu, {"--id", "c1", "--pid", std::to_string(cuda), std::to_string(nvml)});
  EXPECT_EQ(r.rc, 3) << r.out << r.err;
  EXPECT_NE(r.out.find("container \"c1\": a checkpoint would be refused"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("hint: pid " + std::to_string(nvml) + " is not a CUDA process"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(std::to_string(cuda) + " "), std::string::npos) << r.out;
  for (const auto& c : gpu.calls()) EXPECT_EQ(c.op, "get-state") << "diagnose must change nothing";
  EXPECT_EQ(gpu.state(cuda), "running");

  auto j = diagnose(gpu, {"--id", "c1", "--pid", std::to_string(cuda), "--json"});
  EXPECT_EQ(j.rc, 0) << j.out << j.err;
  auto doc = nlohmann::json::parse(j.out);
  EXPECT_EQ(doc["would_refuse"], false);
  ASSERT_EQ(doc["processes"].size(), 1u);
  EXPECT_EQ(doc["processes"][0]["pid"], cuda);
  EXPECT_EQ(doc["processes"][0]["cuda_state"], "running");
  EXPECT_EQ(doc["processes"][0]["holders"][0]["path"], gpu.device());
}

TEST(Diagnose, AsksTheRuntimeForPids) {
  FakeGpu gpu;
  pid_t cuda = gpu.start_app();
  fs::path rt = gpu.dir() / "fake-runc";
  spit(rt,
       "#!/bin/sh\ncase \"$*\" in\n'--root=/run/nvtest/k8s.io ps --format json c9'|'ps --format json c8') ;;\n*) exit "
       "9;;\nesac\necho '[" +
           std::to_string(cuda) + "]'\n");
  fs::permissions(rt, fs::perms::owner_all);
  auto r =
      diagnose(gpu, {"--id", "c9", "--namespace", "k8s.io", "--runtime", rt.string(), "--runtime-root", "/run/nvtest/k8s.io"});
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("1 CUDA device holders to toggle"), std::string::npos) << r.out;
  // No root named (and no bundle to read it from): the runtime's own default, no guessed path.
  r = diagnose(gpu, {"--id", "c8", "--namespace", "k8s.io", "--runtime", rt.string()});
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
}

TEST(Diagnose, UsageErrors) {
  FakeGpu gpu;
  EXPECT_EQ(diagnose(gpu, {}).rc, 2);
  EXPECT_EQ(diagnose(gpu, {"--bogus"}).rc, 2);
  auto r = diagnose(gpu, {"--id", "x", "--runtime", "/nonexistent/runc"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("error: "), std::string::npos);
}
