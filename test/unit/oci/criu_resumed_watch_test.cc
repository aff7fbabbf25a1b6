// The FIFO CRIU tells when a leave-running dump's processes run again (--resumed-fifo): the call
// comes once on a byte, never without one, and the watch ends (and removes the FIFO) either way.
#include "oci/criu_resumed_watch.h"

#include <fcntl.h>
#include <gtest/gtest.h>
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
    CriuResumedWatch w(dir.path() / "r.fifo", [&] {
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
    CriuResumedWatch w(dir.path() / "r.fifo", [&] { ++calls; });
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
  EXPECT_NO_THROW(CriuResumedWatch(dir.path() / "r.fifo", [] {}));
  EXPECT_THROW(CriuResumedWatch(dir.path() / "missing" / "r.fifo", [] {}), std::exception);
}
