// The FIFO CRIU tells when a leave-running dump's processes run again (--resumed-fifo): the call
// comes once on a byte, never without one, and the watch ends (and removes the FIFO) either way.
// The gate (--write-gate) gets its byte only once the call has returned, and hangs up at the end.
#include "oci/criu_resumed_watch.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>

#include "common/scratch_dir.h"
#include "common/unique_fd.h"

using namespace nvproxy;
using namespace nvproxy::oci;
using namespace std::chrono_literals;

namespace {

// What CRIU does: open without blocking (ENXIO when nobody reads), write a byte, close.
bool tell(const std::filesystem::path& fifo, bool with_byte) {
  UniqueFd fd(::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC));
  if (!fd) return false;
  return !with_byte || ::write(fd.get(), "r", 1) == 1;
}

}  // namespace

TEST(CriuResumedWatch, CallsOnceWhenCriuWritesItsByte) {
  ScratchDir dir(std::filesystem::temp_directory_path() / ("nvproxy-resumed-test-" + std::to_string(::getpid())));
  std::mutex mu;
  std::condition_variable cv;
  int calls = 0;
  {
    CriuResumedWatch w(dir.path() / "r.fifo", {}, [&] {
      std::lock_guard l(mu);
      ++calls;
      cv.notify_all();
    });
    ASSERT_TRUE(tell(w.path(), true));
    std::unique_lock l(mu);
    ASSERT_TRUE(cv.wait_for(l, 10s, [&] { return calls == 1; }));
  }
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "r.fifo"));
}

TEST(CriuResumedWatch, NoCallWithoutAByte) {
  ScratchDir dir(std::filesystem::temp_directory_path() / ("nvproxy-resumed-test-" + std::to_string(::getpid())));
  std::atomic<int> calls = 0;
  {
    CriuResumedWatch w(dir.path() / "r.fifo", {}, [&] { ++calls; });
    ASSERT_TRUE(std::filesystem::is_fifo(w.path()));
    ASSERT_TRUE(tell(w.path(), false));  // a writer that came and went
  }                                      // the destructor joins: it would hang here if the watch did not end
  EXPECT_EQ(calls.load(), 0);
  // Nothing reads it any more: CRIU's open fails instead of blocking, and it goes on.
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "r.fifo"));
}

TEST(CriuResumedWatch, ReplacesAStaleFileAndRefusesAMissingDirectory) {
  ScratchDir dir(std::filesystem::temp_directory_path() / ("nvproxy-resumed-test-" + std::to_string(::getpid())));
  { std::ofstream(dir.path() / "r.fifo") << "stale"; }
  EXPECT_NO_THROW(CriuResumedWatch(dir.path() / "r.fifo", {}, [] {}));
  EXPECT_THROW(CriuResumedWatch(dir.path() / "missing" / "r.fifo", {}, [] {}), std::exception);
}

namespace {

// CRIU's side of the gate: whether a byte (or a hang-up) is there within `wait`.
short gate_events(int fd, std::chrono::milliseconds wait) {
  pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
  return ::poll(&p, 1, static_cast<int>(wait.count())) > 0 ? p.revents : 0;
}

}  // namespace

TEST(CriuResumedWatch, TheGateOpensOnceTheCallHasReturned) {
  ScratchDir dir(std::filesystem::temp_directory_path() / ("nvproxy-resumed-test-" + std::to_string(::getpid())));
  UniqueFd gate;
  short during = -1;
  std::atomic<bool> returned = false;
  {
    CriuResumedWatch w(dir.path() / "r.fifo", dir.path() / "g.fifo", [&] {
      during = gate_events(gate.get(), 0ms);  // CUDA being resumed: the pages must still wait
      returned = true;
    });
    ASSERT_EQ(w.gate_path(), dir.path() / "g.fifo");
    ASSERT_TRUE(std::filesystem::is_fifo(w.gate_path()));
    gate.reset(::open(w.gate_path().c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));  // as CRIU opens it
    ASSERT_TRUE(gate);
    EXPECT_EQ(gate_events(gate.get(), 0ms), 0) << "shut before CRIU's byte";
    ASSERT_TRUE(tell(w.path(), true));
    EXPECT_NE(gate_events(gate.get(), 10000ms) & POLLIN, 0) << "the byte, once the call returned";
    EXPECT_TRUE(returned.load());
    EXPECT_EQ(during, 0);
  }
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "g.fifo"));
}

TEST(CriuResumedWatch, TheGateHangsUpWhenTheWatchEndsWithoutAByte) {
  ScratchDir dir(std::filesystem::temp_directory_path() / ("nvproxy-resumed-test-" + std::to_string(::getpid())));
  UniqueFd gate;
  {
    CriuResumedWatch w(dir.path() / "r.fifo", dir.path() / "g.fifo", [] {});
    gate.reset(::open(w.gate_path().c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
    ASSERT_TRUE(gate);
  }
  // A CRIU still waiting is let go: the pages are written (or the dump ends) either way.
  EXPECT_NE(gate_events(gate.get(), 10000ms) & POLLHUP, 0);
}
