// A runsc pod container's end through `runsc wait` (a script standing in for runsc): the exit code
// of its answer reaches the caller once; a wait the container's delete ends reports nothing; an
// answer that is not runsc's is not taken for an exit.
#include "shim/task/sandboxed_exit_wait.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

using namespace nvproxy;
using namespace nvproxy::shim;
using namespace std::chrono_literals;

TEST(RunscWaitAnswer, ExitCodeAsContainerdCountsIt) {
  EXPECT_EQ(runsc_wait_exit_code(R"({"id":"c1","exitStatus":0})"), 0);
  EXPECT_EQ(runsc_wait_exit_code("{\"id\":\"c1\",\"exitStatus\":137}\n"), 137);
  EXPECT_EQ(runsc_wait_exit_code(R"({"id":"c1"})"), std::nullopt);
  EXPECT_EQ(runsc_wait_exit_code(R"({"exitStatus":"3"})"), std::nullopt);
  EXPECT_EQ(runsc_wait_exit_code(R"({"exitStatus":-1})"), std::nullopt);
  EXPECT_EQ(runsc_wait_exit_code("container not found"), std::nullopt);
  EXPECT_EQ(runsc_wait_exit_code(""), std::nullopt);
}

namespace {

struct Heard {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int> codes;
  void add(int c) {
    std::lock_guard l(mu);
    codes.push_back(c);
    cv.notify_all();
  }
  bool wait_for_one() {
    std::unique_lock l(mu);
    return cv.wait_for(l, 10s, [&] { return !codes.empty(); });
  }
};

}  // namespace

TEST(SandboxedExitWait, TellsTheExitCodeOnce) {
  DirectWaiter waiter;
  ProcessRunner runner(waiter);
  Logger log(-1);
  Heard heard;
  {
    SandboxedExitWait w(runner, log, "c1", {"/bin/sh", "-c", R"(echo '{"id":"c1","exitStatus":3}')"},
                        [&](int code) { heard.add(code); });
    ASSERT_TRUE(heard.wait_for_one());
  }
  ASSERT_EQ(heard.codes.size(), 1u);
  EXPECT_EQ(heard.codes[0], 3);
}

TEST(SandboxedExitWait, TheDeleteEndsAWaitWithoutAnExit) {
  DirectWaiter waiter;
  ProcessRunner runner(waiter);
  Logger log(-1);
  Heard heard;
  const auto t0 = std::chrono::steady_clock::now();
  {
    // A container that runs on: runsc wait blocks until the destructor kills it.
    SandboxedExitWait w(runner, log, "c1", {"/bin/sh", "-c", "exec sleep 1000"}, [&](int code) { heard.add(code); });
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s) << "the destructor did not end runsc wait";
  EXPECT_TRUE(heard.codes.empty());
}

TEST(SandboxedExitWait, AFailedWaitIsNoExit) {
  DirectWaiter waiter;
  ProcessRunner runner(waiter);
  Logger log(-1);
  Heard heard;
  {
    SandboxedExitWait w(runner, log, "c1", {"/bin/sh", "-c", "echo 'container \"c1\" not found' >&2; exit 1"},
                        [&](int code) { heard.add(code); });
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (w.waiting() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    ASSERT_FALSE(w.waiting()) << "runsc wait did not end";
  }
  EXPECT_TRUE(heard.codes.empty());
}
