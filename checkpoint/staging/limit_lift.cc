#include "checkpoint/staging/limit_lift.h"

#include <nlohmann/json.hpp>
#include <thread>
#include <utility>

#include "checkpoint/facts/gpu_facts.h"
#include "common/error.h"
#include "common/fs.h"

namespace nvproxy::checkpoint {

namespace fs = std::filesystem;

namespace {

std::string value_text(std::uint64_t v) {
  return v == kNoLimit ? "no limit" : format_bytes(v);
}

void write_record(const fs::path& record, const std::vector<LimitChange>& changes) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& c : changes)
    j.push_back({{"file", c.file.string()}, {"from", c.from}, {"to", c.to}, {"cgroup", c.cgroup.string()}});
  write_file_atomic(record, j.dump(1) + "\n", 0600);
}

std::vector<LimitChange> read_record(const fs::path& record) {
  std::vector<LimitChange> out;
  for (const auto& e : nlohmann::json::parse(read_file(record)))
    out.push_back({.file = e.at("file").get<std::string>(),
                   .from = e.at("from").get<std::uint64_t>(),
                   .to = e.at("to").get<std::uint64_t>(),
                   .cgroup = e.value("cgroup", "")});
  return out;
}

// Puts back `changes` in reverse order; what cannot go back stays in `changes` (in order).
PutBack put_back_changes(MemoryProbe& probe, std::vector<LimitChange>& changes, std::chrono::milliseconds settle) {
  PutBack out;
  std::vector<LimitChange> left;
  const auto deadline = std::chrono::steady_clock::now() + settle;
  for (auto it = changes.rbegin(); it != changes.rend(); ++it) {
    const LimitChange& c = *it;
    try {
      // The driver frees its staging as each process resumes: wait (bounded) until the usage is
      // under the limit that goes back, so that putting it back reclaims nothing and kills no one.
      if (!c.cgroup.empty() && c.from != kNoLimit) {
        std::uint64_t used = probe.used(c.cgroup);
        while (used > c.from && std::chrono::steady_clock::now() < deadline) {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the kernel has no event for a usage falling
          used = probe.used(c.cgroup);
        }
        if (used > c.from) {
          out.left.push_back(c.file.string() + " stays at " + value_text(c.to) + ": the cgroup still uses " + format_bytes(used) +
                             ", above its limit of " + value_text(c.from));
          left.insert(left.begin(), c);
          continue;
        }
      }
      probe.write_limit(c.file, c.from);
      out.restored.push_back(c.file.string() + ": " + value_text(c.from));
    } catch (const Error& e) {
      if (e.code() == Code::NotFound) continue;  // the cgroup is gone, and its limit with it
      out.left.push_back(c.file.string() + " stays at " + value_text(c.to) + ": " + e.what());
      left.insert(left.begin(), c);
    }
  }
  changes = std::move(left);
  return out;
}

}  // namespace

LimitLift::LimitLift(MemoryProbe& probe, std::vector<LimitChange> changes, fs::path record, Logger& log, std::string who,
                     std::chrono::milliseconds settle)
    : changes_(std::move(changes)), record_(std::move(record)), log_(&log), who_(std::move(who)), settle_(settle) {
  if (changes_.empty()) return;
  // Lifts of an earlier shim that died are put back first: their record is about to be replaced.
  put_back_recorded(probe, record_, log, who_, settle_);
  write_record(record_, changes_);
  since_ = std::chrono::steady_clock::now();
  for (size_t i = 0; i < changes_.size(); ++i) {
    if (changes_[i].preset) continue;
    try {
      probe.write_limit(changes_[i].file, changes_[i].to);
    } catch (const Error& e) {
      std::vector<LimitChange> done(changes_.begin(), changes_.begin() + static_cast<std::ptrdiff_t>(i));
      put_back_changes(probe, done, settle_);
      std::error_code ec;
      if (done.empty())
        fs::remove(record_, ec);
      else
        write_record(record_, done);
      throw Error(Code::FailedPrecondition, "raising " + changes_[i].file.string() + " from " + value_text(changes_[i].from) +
                                                " to " + value_text(changes_[i].to) + " failed: " + e.what());
    }
  }
  probe_ = &probe;
  std::string what;
  for (const auto& c : changes_)
    what += (what.empty() ? "" : ", ") + c.file.string() + " " + value_text(c.from) + " -> " + value_text(c.to);
  log_->info(who_ + ": memory limits lifted while device memory is staged in host memory: " + what);
}

LimitLift::LimitLift(LimitLift&& o) noexcept
    : probe_(std::exchange(o.probe_, nullptr)),
      changes_(std::move(o.changes_)),
      record_(std::move(o.record_)),
      log_(o.log_),
      who_(std::move(o.who_)),
      settle_(o.settle_),
      since_(o.since_) {}

LimitLift& LimitLift::operator=(LimitLift&& o) noexcept {
  if (this != &o) {
    put_back();
    probe_ = std::exchange(o.probe_, nullptr);
    changes_ = std::move(o.changes_);
    record_ = std::move(o.record_);
    log_ = o.log_;
    who_ = std::move(o.who_);
    settle_ = o.settle_;
    since_ = o.since_;
  }
  return *this;
}

PutBack LimitLift::put_back() noexcept {
  if (!probe_) return {};
  MemoryProbe& probe = *std::exchange(probe_, nullptr);
  PutBack out;
  try {
    out = put_back_changes(probe, changes_, settle_);
    std::error_code ec;
    if (changes_.empty())
      fs::remove(record_, ec);
    else
      write_record(record_, changes_);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - since_).count();
    std::string put;
    for (const auto& r : out.restored) put += (put.empty() ? "" : ", ") + r;
    log_->info(who_ + ": memory limits put back after " + std::to_string(ms) + " ms lifted" + (put.empty() ? "" : ": " + put));
    for (const auto& l : out.left) log_->warn(who_ + ": memory limit not put back: " + l + " (record " + record_.string() + ")");
  } catch (const std::exception& e) {
    log_->warn(who_ + ": memory limits not put back: " + e.what() + " (record " + record_.string() + ")");
  }
  return out;
}

PutBack put_back_recorded(MemoryProbe& probe, const fs::path& record, Logger& log, const std::string& who,
                          std::chrono::milliseconds settle) {
  std::error_code ec;
  if (!fs::exists(record, ec)) return {};
  PutBack out;
  try {
    std::vector<LimitChange> changes = read_record(record);
    out = put_back_changes(probe, changes, settle);
    if (changes.empty())
      fs::remove(record, ec);
    else
      write_record(record, changes);
    for (const auto& r : out.restored) log.info(who + ": memory limit an earlier shim lifted put back: " + r);
    for (const auto& l : out.left) log.warn(who + ": memory limit an earlier shim lifted not put back: " + l);
  } catch (const std::exception& e) {
    log.warn(who + ": the record of lifted memory limits " + record.string() + " cannot be used: " + e.what());
  }
  return out;
}

}  // namespace nvproxy::checkpoint
