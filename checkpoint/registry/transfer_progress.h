// How far a push or pull is: bytes moved, bytes skipped (already there), the rate and the time
// left. On a terminal one line, redrawn each second; otherwise (the shim's log) a line every
// `interval`. Counters are added to from every stream's thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace nvproxy::checkpoint {

class TransferProgress {
 public:
  using Sink = std::function<void(const std::string& line, bool redraw)>;
  // `what`: "pushing 12 GiB to host/repo"; `sink` null: nothing is shown, the counters still count.
  TransferProgress(std::string what, std::uint64_t total, Sink sink, bool terminal,
                   std::chrono::seconds interval = std::chrono::seconds(10));
  ~TransferProgress();
  TransferProgress(const TransferProgress&) = delete;
  TransferProgress& operator=(const TransferProgress&) = delete;

  void moved(std::uint64_t n) { moved_ += n; }
  void unmoved(std::uint64_t n) { moved_ -= n; }  // an attempt that failed: its bytes go again
  void skipped(std::uint64_t n) { skipped_ += n; }
  [[nodiscard]] std::uint64_t moved_bytes() const { return moved_; }
  [[nodiscard]] std::uint64_t skipped_bytes() const { return skipped_; }
  // "3.2 of 18.0 GiB, 850 MB/s, 17 s left"
  [[nodiscard]] std::string line() const;
  // "18.0 GiB: 2.1 GiB sent, 15.9 GiB already there, 850 MB/s in 2.5 s"; stops the reports.
  std::string finish(const std::string& verb);

 private:
  void report();
  std::string what_;
  std::uint64_t total_;
  Sink sink_;
  bool terminal_;
  std::chrono::seconds interval_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::atomic<std::uint64_t> moved_{0}, skipped_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread reporter_;
};

// "1.5 GiB", "300.0 MiB", "12 B".
std::string human_bytes(std::uint64_t n);

}  // namespace nvproxy::checkpoint
