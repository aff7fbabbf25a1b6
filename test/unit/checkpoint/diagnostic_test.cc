#include "checkpoint/report/diagnostic.h"

#include <gtest/gtest.h>

#include "fake_gpu.h"

using namespace nvproxy;
using namespace nvproxy::checkpoint;
using namespace nvproxy::checkpoint::testing;

namespace {
Diagnostic sample() {
  Diagnostic d{.container = "sglang", .verdict = "refused", .reason = "2 processes still hold GPU devices after CUDA toggle"};
  d.processes.push_back({.pid = 44,
                         .name = "python3",
                         .cmdline = "python3 -m sglang.launch_server",
                         .cuda_state = "running",
                         .holders = {{.pid = 44, .kind = HolderKind::Fd, .fd = 17, .path = "/dev/nvidiactl"}}});
  d.processes.push_back({.pid = 91,
                         .name = "nvidia-smi",
                         .cmdline = "nvidia-smi -l 1",
                         .cuda_state = "(no CUDA)",
                         .holders = {{.pid = 91, .kind = HolderKind::Fd, .fd = 3, .path = "/dev/nvidia0"},
                                     {.pid = 91, .kind = HolderKind::Mapping, .path = "/dev/nvidia0"}},
                         .hint = "pid 91 is not a CUDA process (NVML user?); stop it or exclude it before checkpointing"});
  d.phases = {{"scan", 1.5}, {"lock", 0.25}};
  return d;
}
}  // namespace

TEST(Diagnostic, TextTable) {
  EXPECT_EQ(render_text(sample()),
            "checkpoint of container \"sglang\" refused: 2 processes still hold GPU devices after CUDA toggle\n"
            "PID   NAME        CUDA STATE   FD     DEVICE           COMMAND\n"
            "44    python3     running      17     /dev/nvidiactl   python3 -m sglang.launch_server\n"
            "91    nvidia-smi  (no CUDA)    3,map  /dev/nvidia0     nvidia-smi -l 1\n"
            "hint: pid 91 is not a CUDA process (NVML user?); stop it or exclude it before checkpointing\n");
}

TEST(Diagnostic, HeaderMatchesDesignWidths) {
  Diagnostic d = sample();
  d.processes.pop_back();
  std::string t = render_text(d);
  EXPECT_NE(t.find("\nPID   NAME     CUDA STATE   FD   DEVICE           COMMAND\n"
                   "44    python3  running      17   /dev/nvidiactl   python3 -m sglang.launch_server\n"),
            std::string::npos)
      << t;
}

TEST(Diagnostic, RollbackStuckWarningsAndLongLists) {
  Diagnostic d{.container = "c", .verdict = "failed", .reason = "CUDA checkpoint failed in 1 process"};
  ProcessReport p{.pid = 5, .name = "x", .cmdline = std::string(100, 'a'), .cuda_state = "running"};
  for (int i = 0; i < 23; ++i) p.holders.push_back({.pid = 5, .kind = HolderKind::Fd, .fd = i, .path = "/dev/nvidia0"});
  d.processes.push_back(p);
  d.rolled_back = {5, 6};
  d.stuck = {{7, "checkpointed", "restore answered CUDA_ERROR_NOT_SUPPORTED (801)"}};
  d.warnings = {"careful"};
  std::string t = render_text(d);
  // One row per process and device, however many fds hold it (34 rows of one process before).
  EXPECT_NE(t.find("running      0,1,2,3 +19  /dev/nvidia0"), std::string::npos) << t;
  EXPECT_EQ(t.find("\n5 ", t.find("/dev/nvidia0") + 1), std::string::npos) << t;
  EXPECT_NE(t.find(std::string(60, 'a') + " ..."), std::string::npos);
  EXPECT_EQ(t.find(std::string(61, 'a')), std::string::npos);
  EXPECT_NE(t.find("warning: careful\n"), std::string::npos);
  EXPECT_NE(t.find("rolled back: pid 5, 6 CUDA-running again"), std::string::npos);
  EXPECT_NE(t.find("STUCK: pid 7 is left checkpointed: restore answered CUDA_ERROR_NOT_SUPPORTED (801)\n"), std::string::npos);
  EXPECT_EQ(count_processes(1), "1 process");
}

TEST(Diagnostic, JsonShapeAndFile) {
  Diagnostic d = sample();
  d.rolled_back = {44};
  d.stuck = {{45, "locked", "unlock answered X"}};
  auto j = to_json(d);
  EXPECT_EQ(j["container"], "sglang");
  EXPECT_EQ(j["reason"], "2 processes still hold GPU devices after CUDA toggle");
  ASSERT_EQ(j["processes"].size(), 2u);
  const auto& p = j["processes"][1];
  EXPECT_EQ(p["pid"], 91);
  EXPECT_EQ(p["name"], "nvidia-smi");
  EXPECT_EQ(p["cmdline"], "nvidia-smi -l 1");
  EXPECT_EQ(p["cuda_state"], "(no CUDA)");
  EXPECT_EQ(p["holders"][0]["fd"], 3);
  EXPECT_EQ(p["holders"][0]["path"], "/dev/nvidia0");
  EXPECT_EQ(p["holders"][1]["mapping"], true);
  EXPECT_NE(p["hint"].get<std::string>().find("NVML user"), std::string::npos);
  EXPECT_DOUBLE_EQ(j["phases"]["scan_ms"].get<double>(), 1.5);
  EXPECT_EQ(j["rolled_back"], nlohmann::json::array({44}));
  EXPECT_EQ(j["stuck"][0]["pid"], 45);
  EXPECT_EQ(j["stuck"][0]["state"], "locked");

  fs::path dir = make_temp_dir();
  write_json(d, dir / "checkpoint-diagnostic.json");
  auto back = nlohmann::json::parse(slurp(dir / "checkpoint-diagnostic.json"));
  EXPECT_EQ(back["processes"][0]["pid"], 44);
  fs::remove_all(dir);
}

TEST(Diagnostic, OneRowPerProcessAndDevice) {
  std::vector<Holder> hs;
  for (int fd : {9, 4, 7}) hs.push_back({.pid = 1, .kind = HolderKind::Fd, .fd = fd, .path = "/dev/nvidia0"});
  hs.push_back({.pid = 1, .kind = HolderKind::Fd, .fd = 3, .path = "/dev/nvidiactl"});
  hs.push_back({.pid = 1, .kind = HolderKind::Mapping, .path = "/dev/nvidia-uvm"});
  hs.push_back({.pid = 1, .kind = HolderKind::Mapping, .path = "/dev/nvidiactl"});
  auto g = group_by_device(hs);
  ASSERT_EQ(g.size(), 3u);
  EXPECT_EQ(g[0], (std::pair<std::string, std::string>{"9,4,7", "/dev/nvidia0"}));
  EXPECT_EQ(g[1], (std::pair<std::string, std::string>{"3,map", "/dev/nvidiactl"}));
  EXPECT_EQ(g[2], (std::pair<std::string, std::string>{"map", "/dev/nvidia-uvm"}));
}
