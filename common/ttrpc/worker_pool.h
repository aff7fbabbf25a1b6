// Threads that run ttrpc handlers off the I/O threads. Handlers may block for minutes (Wait
// blocks until a process exits), so the pool grows whenever every worker is busy instead of
// queueing behind a blocked one; surplus idle workers exit so a burst does not pin threads.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <list>
#include <mutex>
#include <thread>
#include <vector>

namespace nvproxy::ttrpc {

class WorkerPool {
 public:
  explicit WorkerPool(std::size_t max_idle = 4) : max_idle_(max_idle) {}
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;
  ~WorkerPool() { join(); }

  // Runs job on an idle worker, or on a new one when none is idle. job must not throw.
  void submit(std::function<void()> job);

  // Stops accepting jobs, waits for running ones to return, joins every thread.
  void join();

  [[nodiscard]] std::size_t threads() const;

 private:
  void worker_loop(std::list<std::thread>::iterator self);
  void reap_exited_locked(std::vector<std::thread>& out);

  const std::size_t max_idle_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::list<std::thread> threads_;
  std::vector<std::list<std::thread>::iterator> exited_;  // finished, not yet joined
  std::size_t idle_ = 0;
  bool stopping_ = false;
};

}  // namespace nvproxy::ttrpc
