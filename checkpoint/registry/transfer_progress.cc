#include "checkpoint/registry/transfer_progress.h"

#include <cmath>
#include <cstdio>

namespace nvproxy::checkpoint {

using Clock = std::chrono::steady_clock;

namespace {

std::string fixed1(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string rate(std::uint64_t bytes, double seconds) {
  return seconds > 0 ? fixed1(static_cast<double>(bytes) / seconds / 1e6) + " MB/s" : "- MB/s";
}

}  // namespace

std::string human_bytes(std::uint64_t n) {
  if (n >= (1ull << 30)) return fixed1(static_cast<double>(n) / (1ull << 30)) + " GiB";
  if (n >= (1ull << 20)) return fixed1(static_cast<double>(n) / (1ull << 20)) + " MiB";
  if (n >= (1ull << 10)) return fixed1(static_cast<double>(n) / (1ull << 10)) + " KiB";
  return std::to_string(n) + " B";
}

TransferProgress::TransferProgress(std::string what, std::uint64_t total, Sink sink, bool terminal, std::chrono::seconds interval)
    : what_(std::move(what)), total_(total), sink_(std::move(sink)), terminal_(terminal), interval_(interval) {
  if (sink_) reporter_ = std::thread([this] { report(); });
}

TransferProgress::~TransferProgress() {
  {
    std::lock_guard lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  if (reporter_.joinable()) reporter_.join();
}

std::string TransferProgress::line() const {
  const double s = std::chrono::duration<double>(Clock::now() - start_).count();
  const std::uint64_t done = moved_ + skipped_, moved = moved_;
  std::string out = what_ + ": " + human_bytes(done) + " of " + human_bytes(total_) + ", " + rate(moved, s);
  if (moved > 0 && done < total_) {
    const double left = static_cast<double>(total_ - done) / (static_cast<double>(moved) / s);
    out += ", " + std::to_string(std::lround(left)) + " s left";
  }
  return out;
}

void TransferProgress::report() {
  std::unique_lock lock(mu_);
  const auto every = terminal_ ? std::chrono::seconds(1) : interval_;
  while (!cv_.wait_for(lock, every, [this] { return done_; })) sink_(line(), terminal_);
}

std::string TransferProgress::finish(const std::string& verb) {
  {
    std::lock_guard lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  if (reporter_.joinable()) reporter_.join();
  const double s = std::chrono::duration<double>(Clock::now() - start_).count();
  return what_ + ": " + human_bytes(moved_) + " " + verb + ", " + human_bytes(skipped_) + " already there, " + rate(moved_, s) +
         " in " + fixed1(s) + " s";
}

}  // namespace nvproxy::checkpoint
