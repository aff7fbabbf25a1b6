// The driver against a scripted stand-in runtime that records its argv and answers like runc.
#include "oci/runtime.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "common/error.h"
#include "common/fs.h"
#include "common/log.h"

using namespace nvproxy;
using namespace nvproxy::oci;

namespace {
class RuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("nvproxy-rt-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    script_ = dir_ / "fake-runc";
    std::ofstream(script_)
        << "#!/bin/sh\n"
           "echo \"$@\" >> "
        << (dir_ / "argv").string()
        << "\n"
           "for a in \"$@\"; do case $a in --log=*) log=${a#--log=};; esac; done\n"
           "case \" $* \" in\n"
           "  *\" state \"*) echo '{\"status\":\"running\",\"pid\":42,\"bundle\":\"/b\"}';;\n"
           "  *\" ps \"*) echo '[1,2,3]';;\n"
           "  *\" start \"*) echo '{\"level\":\"error\",\"msg\":\"container does not exist\"}' >> $log; exit 1;;\n"
           "esac\n";
    ::chmod(script_.c_str(), 0755);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string argv() { return read_file(dir_ / "argv"); }

  std::filesystem::path dir_, script_;
  DirectWaiter waiter_;
  ProcessRunner runner_{waiter_};
  Logger log_{-1};
};
}  // namespace

TEST_F(RuntimeTest, GlobalFlagsAndState) {
  Runtime rt({.binary = script_.string(), .root = "/run/r", .extra_args = {"--debug"}}, runner_, log_, dir_ / "log.json");
  auto st = rt.state("c1");
  EXPECT_EQ(st.status, "running");
  EXPECT_EQ(st.pid, 42);
  EXPECT_EQ(argv(), "--root=/run/r --log=" + (dir_ / "log.json").string() + " --log-format=json --debug state c1\n");
  EXPECT_EQ(rt.ps("c1"), (std::vector<int>{1, 2, 3}));
}

TEST_F(RuntimeTest, FailureCarriesRuntimeLogAndContainer) {
  Runtime rt({.binary = script_.string()}, runner_, log_, dir_ / "log.json");
  try {
    rt.start("c9");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::NotFound);
    EXPECT_NE(std::string(e.what()).find("start of container \"c9\" failed: container does not exist"), std::string::npos)
        << e.what();
  }
}

// runc 1.1 takes --criu only as a global flag: `runc checkpoint --criu=...` fails with "flag provided
// but not defined" (seen on the GPU machine with runc 1.1.15 and here with 1.1.5).
TEST_F(RuntimeTest, CriuPathIsAGlobalFlag) {
  Runtime rt({.binary = script_.string(), .criu_path = "/opt/kit/bin/criu"}, runner_, log_, dir_ / "log.json");
  rt.checkpoint("c1", {.leave_running = true, .image_path = "/img", .work_path = "/work"});
  std::string a = argv();
  EXPECT_LT(a.find("--criu=/opt/kit/bin/criu"), a.find(" checkpoint ")) << a;
  std::filesystem::remove(dir_ / "argv");
  rt.restore("c1", {.bundle = dir_, .image_path = "/img", .pid_file = dir_ / "pid"});
  a = argv();
  EXPECT_LT(a.find("--criu=/opt/kit/bin/criu"), a.find(" restore ")) << a;
}
