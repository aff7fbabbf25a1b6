// Internal to the orchestrator's files (orchestrator/*.cc, attempt/*): what one classification
// found, phase timing, the parallel toggle. Made of the vocabulary the class is made of, not of the
// class: orchestrator.h declares Classified for its private members, and its files include both.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include "checkpoint/attempt/release.h"
#include "checkpoint/report/diagnostic.h"
#include "checkpoint/shared/cuda_toggler.h"
#include "checkpoint/shared/holder_scan.h"
#include "common/error.h"
#include "common/log.h"
#include "common/parallel.h"
#include "common/process.h"

namespace nvproxy::checkpoint {

namespace detail {

struct Classified {
  std::map<pid_t, std::vector<Holder>> holders;
  std::map<pid_t, CudaState> state;          // holders whose state the driver reports
  std::map<pid_t, std::string> state_error;  // the others: what GetState answered
  std::vector<pid_t> cuda;                   // running CUDA holders: the ones to toggle
  std::vector<ProcessReport> blockers;       // holders the toggle cannot release, with hints
  ReleasePlan release;                       // forked children whose inherited device files the image leaves out
  std::string driver_error;                  // the CUDA driver cannot be asked at all: every holder is a blocker
};

using Clock = std::chrono::steady_clock;

// How long a process whose toggle failed is given to be gone: a job runner's worker fails its lock
// or checkpoint with OPERATING_SYSTEM as it ends, and under runsc, locked, took up to 3.5 s to go
// (measured on the H200).
constexpr auto kEndingGrace = std::chrono::milliseconds(4000);
constexpr auto kEndingPoll = std::chrono::milliseconds(50);
// How long a holder without CUDA may stay so before it is a blocker (a worker's cuInit takes up to
// about a second on the H200), and for how long scans that find only such holders are made again.
constexpr auto kStartingGrace = std::chrono::milliseconds(2000);
constexpr auto kNotCudaRescanFor = std::chrono::seconds(15);

inline std::string fmt_ms(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", ms);
  return buf;
}

// "4,5,9": pids (or fds) for log lines and reasons.
static_assert(std::is_same_v<pid_t, int>, "pid lists are passed as int lists");
inline std::string comma_list(const std::vector<int>& numbers) {
  std::string s;
  for (int n : numbers) s += (s.empty() ? "" : ",") + std::to_string(n);
  return s;
}

// Times one phase: recorded in `phases` and logged when it ends.
class Phase {
 public:
  // verb: what the log line says the phase belongs to ("checkpoint", "restore").
  Phase(std::vector<PhaseTiming>& phases, Logger& log, std::string id, std::string name, std::string verb = "checkpoint")
      : phases_(phases), log_(log), id_(std::move(id)), name_(std::move(name)), verb_(std::move(verb)), start_(Clock::now()) {}
  void done(const std::string& detail = "") {
    if (ended_) return;
    ended_ = true;
    double ms = std::chrono::duration<double, std::milli>(Clock::now() - start_).count();
    phases_.push_back({name_, ms});
    log_.info(verb_ + " " + id_ + ": " + name_ + " " + fmt_ms(ms) + " ms" + (detail.empty() ? "" : " (" + detail + ")"));
  }
  ~Phase() { done(); }

 private:
  std::vector<PhaseTiming>& phases_;
  Logger& log_;
  std::string id_, name_, verb_;
  Clock::time_point start_;
  bool ended_ = false;
};

inline std::string parallelism_text(unsigned parallelism) {
  return parallelism == 0 ? "all at once" : std::to_string(parallelism) + " at a time";
}

// A snapshot that ran out of time: what the error and the diagnostic say about it.
struct SnapshotDeadline {
  std::string reason;  // "snapshot (runc checkpoint) did not finish within N ms; killed ...; container thawed"
  nlohmann::json json;
};

inline SnapshotDeadline snapshot_deadline(const Error& e) {
  SnapshotDeadline d;
  d.json = {{"phase", "snapshot"}};
  if (const auto* de = dynamic_cast<const DeadlineError*>(&e)) {
    d.reason = "snapshot (" + de->command() + ") did not finish within " + std::to_string(de->timeout().count()) + " ms";
    if (!de->aftermath().empty()) d.reason += "; " + de->aftermath();
    d.json["command"] = de->command();
    d.json["timeout_ms"] = de->timeout().count();
    if (de->pgid() > 0) d.json["killed_pgid"] = de->pgid();
    d.json["aftermath"] = de->aftermath();
  } else {
    d.reason = std::string("snapshot did not finish in time: ") + e.what();
  }
  return d;
}

template <class V>
std::vector<pid_t> pids_of(const std::map<pid_t, V>& m) {
  std::vector<pid_t> out;
  for (const auto& [pid, _] : m) out.push_back(pid);
  return out;
}

inline std::map<pid_t, std::vector<Holder>> by_pid(const std::vector<Holder>& hs) {
  std::map<pid_t, std::vector<Holder>> m;
  for (const auto& h : hs) m[h.pid].push_back(h);
  return m;
}

// One toggle per pid on worker threads; collects the CudaErrors. Anything else (the API cannot be
// reached) is rethrown after every worker has finished.
inline std::map<pid_t, CudaError> toggle_all(const std::vector<pid_t>& pids, unsigned parallelism,
                                             const std::function<void(pid_t)>& op) {
  std::mutex mu;
  std::map<pid_t, CudaError> failed;
  std::exception_ptr fatal;
  for_each_parallel(pids, parallelism, [&](pid_t pid) {
    try {
      op(pid);
    } catch (const CudaError& e) {
      std::lock_guard lk(mu);
      failed.emplace(pid, e);
    } catch (...) {
      std::lock_guard lk(mu);
      if (!fatal) fatal = std::current_exception();
    }
  });
  if (fatal) std::rethrow_exception(fatal);
  return failed;
}

}  // namespace detail

}  // namespace nvproxy::checkpoint
