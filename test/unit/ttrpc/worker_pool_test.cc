#include "common/ttrpc/worker_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>

namespace nvproxy::ttrpc {
namespace {

TEST(WorkerPool, GrowsPastBlockedJobs) {
  WorkerPool pool(1);
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::atomic<int> blocked{0};
  for (int i = 0; i < 3; ++i)
    pool.submit([&, gate] {
      ++blocked;
      gate.wait();
    });
  std::promise<void> ran;
  pool.submit([&] { ran.set_value(); });
  EXPECT_EQ(ran.get_future().wait_for(std::chrono::seconds(5)), std::future_status::ready);
  release.set_value();
  pool.join();
  EXPECT_EQ(blocked.load(), 3);
}

TEST(WorkerPool, SurplusIdleWorkersExit) {
  WorkerPool pool(1);
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::atomic<int> started{0};
  for (int i = 0; i < 4; ++i)
    pool.submit([&, gate] {
      ++started;
      gate.wait();
    });
  while (started.load() < 4) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(pool.threads(), 4u);
  release.set_value();
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (pool.threads() > 1 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(pool.threads(), 1u);
  std::atomic<int> n{0};
  for (int i = 0; i < 100; ++i) pool.submit([&] { ++n; });
  pool.join();
  EXPECT_EQ(n.load(), 100);
}

}  // namespace
}  // namespace nvproxy::ttrpc
