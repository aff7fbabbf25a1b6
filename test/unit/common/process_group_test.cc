// Deadlines of ProcessRunner::run: a timeout kills the child's whole process group, and neither a
// timeout nor a normal exit waits for a grandchild that keeps the output pipes open.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>

#include "common/error.h"
#include "common/process.h"

using namespace nvproxy;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

class ProcessGroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("nvproxy-pgrp-" + std::to_string(::getpid()) + "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    for (pid_t p : strays_) ::kill(p, SIGKILL);
    std::filesystem::remove_all(dir_);
  }
  // The pid a script wrote into FILE (0 if none).
  pid_t pid_in(const std::string& file) {
    std::ifstream in(dir_ / file);
    pid_t p = 0;
    in >> p;
    if (p > 0) strays_.push_back(p);
    return p;
  }
  // Waits on the process's exit itself (a pidfd), up to `limit`; true once it is gone.
  static bool gone_within(pid_t pid, std::chrono::milliseconds limit) {
    int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (fd < 0) return errno == ESRCH;
    pollfd p{fd, POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(limit.count()));
    ::close(fd);
    return r == 1;
  }
  std::string path(const std::string& f) { return (dir_ / f).string(); }

  std::filesystem::path dir_;
  std::vector<pid_t> strays_;
  DirectWaiter waiter_;
  ProcessRunner runner_{waiter_};
};

}  // namespace

TEST_F(ProcessGroupTest, TimeoutKillsTheWholeGroup) {
  // The child starts a grandchild that handles no signal specially and sleeps, then waits for it.
  std::string script = "sleep 1000 & echo $! > " + path("grandchild") + "; echo $$ > " + path("child") + "; wait";
  auto t0 = Clock::now();
  RunResult r = runner_.run({.argv = {"sh", "-c", script}, .new_process_group = true, .timeout = 1500ms});
  EXPECT_LT(Clock::now() - t0, 10s);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.term_signal, SIGKILL);
  EXPECT_EQ(r.killed_pgid, r.pid);
  pid_t grandchild = pid_in("grandchild");
  ASSERT_GT(grandchild, 0) << "the script did not start its grandchild within the timeout";
  EXPECT_EQ(pid_in("child"), r.pid);
  EXPECT_TRUE(gone_within(grandchild, 10s)) << "grandchild " << grandchild << " survived the group kill";
}

TEST_F(ProcessGroupTest, WithoutItsOwnGroupOnlyTheChildIsKilled) {
  std::string script = "sleep 1000 & echo $! > " + path("grandchild") + "; wait";
  RunResult r = runner_.run({.argv = {"sh", "-c", script}, .stdout_fd = STDERR_FILENO, .timeout = 1500ms});
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.killed_pgid, 0);
  pid_t grandchild = pid_in("grandchild");
  ASSERT_GT(grandchild, 0);
  EXPECT_EQ(::kill(grandchild, 0), 0) << "the grandchild outside the child's group was killed too";
}

TEST_F(ProcessGroupTest, ExitedChildIsNotHeldUpByAGrandchildOnItsStdout) {
  // The grandchild keeps stdout and stderr open for 1000 s; run() must return once the child exits.
  std::string script = "sleep 1000 & echo $! > " + path("grandchild") + "; echo done; echo bye >&2";
  auto fut = std::async(std::launch::async, [&] { return runner_.run({.argv = {"sh", "-c", script}}); });
  bool returned = fut.wait_for(10s) == std::future_status::ready;
  pid_t grandchild = pid_in("grandchild");
  if (!returned && grandchild > 0) ::kill(grandchild, SIGKILL);  // lets the hung run() end
  ASSERT_TRUE(returned) << "run() kept reading a pipe held by a grandchild";
  RunResult r = fut.get();
  EXPECT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.out, "done\n");
  EXPECT_EQ(r.err, "bye\n");
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(::kill(grandchild, 0), 0) << "a grandchild of a command that exited normally must be left alone";
}

TEST_F(ProcessGroupTest, TimeoutDoesNotWaitForAPipeHolderOutsideTheGroup) {
  // CRIU-like: a helper in a session of its own (out of reach of the group kill) holds stdout.
  std::string script = "setsid sh -c 'echo $$ > " + path("holder") + "; exec sleep 1000' & exec sleep 1000";
  auto fut = std::async(std::launch::async, [&] {
    return runner_.run({.argv = {"sh", "-c", script}, .new_process_group = true, .timeout = 1500ms});
  });
  bool returned = fut.wait_for(15s) == std::future_status::ready;
  pid_t holder = pid_in("holder");
  if (!returned && holder > 0) ::kill(holder, SIGKILL);
  ASSERT_TRUE(returned) << "run() kept reading after the timeout kill";
  RunResult r = fut.get();
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.term_signal, SIGKILL);
}

TEST_F(ProcessGroupTest, TimeoutHoldsWithoutCapturedOutput) {
  // All stdio given as fds: nothing to poll but the child itself, and the deadline still holds.
  auto t0 = Clock::now();
  RunResult r =
      runner_.run({.argv = {"sleep", "1000"}, .stdout_fd = STDERR_FILENO, .stderr_fd = STDERR_FILENO, .timeout = 300ms});
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.term_signal, SIGKILL);
  EXPECT_LT(Clock::now() - t0, 10s);
}

TEST_F(ProcessGroupTest, FastCommandsStayFastAndComplete) {
  std::string big(300000, 'x');
  auto t0 = Clock::now();
  RunResult r = runner_.run({.argv = {"cat"}, .stdin_data = big, .new_process_group = true, .timeout = 10s});
  EXPECT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.out.size(), big.size());
  EXPECT_LT(Clock::now() - t0, 5s);
}

TEST(DeadlineError, NamesCommandObjectTimeoutAndWhatWasDone) {
  DeadlineError e("runc checkpoint", "container \"c1\"", 3000ms, 4242, "killed runc and CRIU (pgid 4242)");
  EXPECT_EQ(e.code(), Code::DeadlineExceeded);
  EXPECT_STREQ(e.what(), "runc checkpoint of container \"c1\" did not finish within 3000 ms; killed runc and CRIU (pgid 4242)");
  DeadlineError more = e.with("container thawed");
  EXPECT_STREQ(more.what(),
               "runc checkpoint of container \"c1\" did not finish within 3000 ms; killed runc and CRIU (pgid 4242); "
               "container thawed");
  EXPECT_EQ(more.pgid(), 4242);
  EXPECT_EQ(more.timeout(), 3000ms);
  EXPECT_EQ(more.command(), "runc checkpoint");
}
