#include "common/ttrpc/worker_pool.h"

#include <utility>

namespace nvproxy::ttrpc {

void WorkerPool::reap_exited_locked(std::vector<std::thread>& out) {
  for (auto it : exited_) {
    out.push_back(std::move(*it));
    threads_.erase(it);
  }
  exited_.clear();
}

void WorkerPool::submit(std::function<void()> job) {
  std::vector<std::thread> finished;
  {
    std::lock_guard lk(mu_);
    if (stopping_) return;
    jobs_.push_back(std::move(job));
    reap_exited_locked(finished);
    if (idle_ >= jobs_.size()) {
      cv_.notify_one();
    } else {
      // Every worker is busy (maybe blocked for good): a new one takes this job.
      threads_.emplace_back();
      auto self = std::prev(threads_.end());
      *self = std::thread([this, self] { worker_loop(self); });
    }
  }
  // An exited worker has left its loop; joining it only waits for its last instructions.
  for (auto& t : finished) t.join();
}

void WorkerPool::worker_loop(std::list<std::thread>::iterator self) {
  std::unique_lock lk(mu_);
  while (true) {
    if (!jobs_.empty()) {
      auto job = std::move(jobs_.front());
      jobs_.pop_front();
      lk.unlock();
      job();
      job = nullptr;  // drop captures (connections) before taking the lock again
      lk.lock();
      continue;
    }
    if (stopping_) return;  // join() joins us
    if (idle_ >= max_idle_) {
      exited_.push_back(self);  // enough idle workers already: leave, the next submit joins us
      return;
    }
    ++idle_;
    cv_.wait(lk, [this] { return stopping_ || !jobs_.empty(); });
    --idle_;
  }
}

void WorkerPool::join() {
  std::list<std::thread> all;
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
    exited_.clear();
    all.swap(threads_);
  }
  cv_.notify_all();
  for (auto& t : all) {
    if (t.joinable()) t.join();
  }
}

std::size_t WorkerPool::threads() const {
  std::lock_guard lk(mu_);
  return threads_.size() - exited_.size();
}

}  // namespace nvproxy::ttrpc
