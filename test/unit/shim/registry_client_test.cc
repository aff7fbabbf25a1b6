// The daemon's seam to nvproxy-image-transfer (shim/task/registry_client.h): the program run under
// the configured deadline and killed with what it started when it hangs, a missing program named,
// the program's own errors rebuilt with their code, a record refused before the bulk moves. The
// real program answers through the same wire (a registry that is not there).
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "common/error.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/process.h"
#include "shim/task/registry_client.h"

namespace nvproxy::shim {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

class TransferProgramTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string t = (fs::temp_directory_path() / "transfer-program-XXXXXX").string();
    dir_ = ::mkdtemp(t.data());
    cfg_.image_store = (dir_ / "store").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A stand-in program: the shell script `body`, its arguments in DIR/args.
  void program(const std::string& body) {
    const fs::path p = dir_ / "nvproxy-image-transfer";
    std::ofstream(p) << "#!/bin/sh\necho \"$@\" >>" << (dir_ / "args").string() << "\n" << body << "\n";
    fs::permissions(p, fs::perms::owner_all);
    cfg_.image_transfer = p.string();
  }
  // The Error `f` throws (its code; its message in `msg`).
  template <typename F>
  Code code_of(F f, std::string* msg = nullptr) {
    try {
      f();
    } catch (const Error& e) {
      if (msg) *msg = e.what();
      return e.code();
    }
    return Code::Ok;
  }

  const std::string ref = "reg.example:5000/ckpt/app@sha256:" + std::string(64, 'a');
  fs::path dir_;
  checkpoint::CheckpointConfig cfg_;
  Logger log_{-1};
  DirectWaiter waiter_;
  ProcessRunner runner_{waiter_};
};

TEST_F(TransferProgramTest, AHangingProgramIsKilledWithWhatItStartedAtTheDeadline) {
  // The program and a child of its own both sleep; the child's pid is left for the test.
  program("sleep 600 & echo $! >" + (dir_ / "child").string() + "\nsleep 600");
  cfg_.image_transfer_timeout_s = 1;
  TransferProgram puller(cfg_, runner_, log_, "create of container \"c1\": ");
  std::string msg;
  const auto t0 = Clock::now();
  EXPECT_EQ(code_of([&] { puller.fetch_kube(ref, dir_ / "into"); }, &msg), Code::DeadlineExceeded);
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(10));
  EXPECT_NE(msg.find("nvproxy-image-transfer fetch-kube of the image " + ref + " did not finish within 1000 ms"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("killed it and what it started"), std::string::npos) << msg;
  const pid_t child = std::stoi(read_file(dir_ / "child"));
  for (int i = 0; i < 100 && ::kill(child, 0) == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_NE(::kill(child, 0), 0) << "the program's child " << child << " outlived the deadline";
}

TEST_F(TransferProgramTest, AHangingPullIsKilledBeforeAnyRecordIsChecked) {
  program("sleep 600");
  cfg_.image_transfer_timeout_s = 1;
  TransferProgram puller(cfg_, runner_, log_, "");
  bool checked = false;
  EXPECT_EQ(code_of([&] { puller.pull(ref, cfg_.image_store, [&](const auto&) { checked = true; }); }), Code::DeadlineExceeded);
  EXPECT_FALSE(checked);
}

TEST_F(TransferProgramTest, AMissingProgramIsNamedWithTheImageAndTheSetting) {
  cfg_.image_transfer = (dir_ / "nowhere" / "nvproxy-image-transfer").string();
  TransferProgram puller(cfg_, runner_, log_, "");
  std::string msg;
  EXPECT_EQ(code_of([&] { puller.pull(ref, cfg_.image_store, nullptr); }, &msg), Code::FailedPrecondition);
  EXPECT_NE(msg.find("cannot run nvproxy-image-transfer record of the image " + ref), std::string::npos) << msg;
  EXPECT_NE(msg.find(cfg_.image_transfer), std::string::npos) << msg;
  EXPECT_NE(msg.find("checkpoint.image_transfer"), std::string::npos) << msg;
}

TEST_F(TransferProgramTest, TheProgramsErrorComesBackWithItsCodeAndWords) {
  program(R"(echo '{"error":{"code":15,"message":"the registry image )" + ref +
          R"(: the registry answered a manifest of digest sha256:b"}}'; exit 1)");
  TransferProgram puller(cfg_, runner_, log_, "");
  std::string msg;
  EXPECT_EQ(code_of([&] { puller.pull(ref, cfg_.image_store, nullptr); }, &msg), Code::DataLoss);
  EXPECT_EQ(msg, "the registry image " + ref + ": the registry answered a manifest of digest sha256:b");
  // A cause that does not name the image (the connection's) is given it.
  program(R"(echo '{"error":{"code":14,"message":"connecting to http://reg.example:5000: Connection refused"}}'; exit 1)");
  EXPECT_EQ(code_of([&] { puller.pull(ref, cfg_.image_store, nullptr); }, &msg), Code::Unavailable);
  EXPECT_EQ(msg, "the registry image " + ref + ": connecting to http://reg.example:5000: Connection refused");
}

TEST_F(TransferProgramTest, AProgramThatDiesWithoutAnAnswerIsSaidSo) {
  program("echo 'half a line' >&2; kill -9 $$");
  TransferProgram puller(cfg_, runner_, log_, "");
  std::string msg;
  EXPECT_EQ(code_of([&] { puller.fetch_kube(ref, dir_ / "into"); }, &msg), Code::Internal);
  EXPECT_NE(msg.find("ended without an answer (killed by signal 9"), std::string::npos) << msg;
}

TEST_F(TransferProgramTest, ARefusedRecordStopsThePullBeforeTheBulk) {
  program(R"(case "$1" in
record) echo '{"ok":{"record":null}}' ;;
*) echo '{"ok":{"entry":"/elsewhere"}}' ;;
esac)");
  TransferProgram puller(cfg_, runner_, log_, "");
  EXPECT_EQ(code_of([&] {
              puller.pull(ref, cfg_.image_store, [](const std::optional<checkpoint::ImageRecord>& rec) {
                if (!rec) throw Error(Code::FailedPrecondition, "no record");
              });
            }),
            Code::FailedPrecondition);
  const std::string args = read_file(dir_ / "args");
  EXPECT_NE(args.find("record " + ref), std::string::npos) << args;
  EXPECT_EQ(args.find("fetch"), std::string::npos) << args;
  EXPECT_NE(args.find("--store " + cfg_.image_store), std::string::npos) << args;
  // Accepted, the entry it names must be in the store's registry/ directory.
  EXPECT_EQ(code_of([&] { puller.pull(ref, cfg_.image_store, nullptr); }), Code::Internal);
}

TEST_F(TransferProgramTest, ThePullsEntryComesBackFromTheStore) {
  const fs::path entry = fs::path(cfg_.image_store) / "registry" / "reg.example:5000/ckpt/app" / std::string(64, 'a');
  program(R"(case "$1" in
record) echo '{"ok":{"record":null}}' ;;
*) echo 'progress 1/1' >&2; echo '{"ok":{"entry":")" +
          entry.string() + R"("}}' ;;
esac)");
  TransferProgram puller(cfg_, runner_, log_, "");
  EXPECT_EQ(puller.pull(ref, cfg_.image_store, nullptr), entry);
}

// The real program: a registry nobody answers is an error naming the reference, through the wire.
TEST_F(TransferProgramTest, TheRealProgramAnswersARegistryThatIsNotThere) {
  cfg_.image_transfer = IMAGE_TRANSFER_PATH;
  cfg_.registry_tls_verify = false;
  cfg_.registry_timeout_s = 5;
  TransferProgram puller(cfg_, runner_, log_, "");
  const std::string nobody = "127.0.0.1:1/ckpt/app@sha256:" + std::string(64, 'a');
  std::string msg;
  EXPECT_NE(code_of([&] { puller.fetch_kube(nobody, dir_ / "into"); }, &msg), Code::Ok);
  EXPECT_NE(msg.find("127.0.0.1:1"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("without an answer"), std::string::npos) << msg;
  EXPECT_EQ(code_of([&] { puller.pull(nobody, "", nullptr); }, &msg), Code::FailedPrecondition);
  EXPECT_NE(msg.find("needs an image store"), std::string::npos) << msg;
}

}  // namespace
}  // namespace nvproxy::shim
