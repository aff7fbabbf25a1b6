// Orchestrator::Attempt: the CUDA toggles (lock all, checkpoint all, resume) and what a failed
// toggle means (attempt.h).
#include <algorithm>

#include "checkpoint/attempt/attempt.h"
#include "checkpoint/report/hints.h"

namespace nvproxy::checkpoint {

using namespace detail;

void Orchestrator::Attempt::lock_all() {
  Phase ph = phase("lock");
  auto failed = toggle_all(c_->cuda, 0, [&](pid_t pid) {
    // Locks are quick (measured 0.3 ms) and bounded by the timeout: always all at once, so every
    // process is quiesced before any is checkpointed.
    o_.ensure_held(pid, "lock");
    o_.toggler_->lock(pid, o_.cfg_.lock_timeout_ms);
    toggled_.record(pid, CudaState::Locked);
  });
  auto ended = drop_ended(failed, "lock");
  ph.done(count_processes(c_->cuda.size()) + (ended.empty() ? "" : ", " + comma_list(ended) + " ended meanwhile"));
  for (const auto& [pid, _] : failed) toggled_.unsure(pid);
  if (!failed.empty())
    throw rollback(failure_rows(failed), Code::FailedPrecondition, "failed",
                   "CUDA lock failed in " + count_processes(failed.size()));
}

std::optional<Orchestrator::Again> Orchestrator::Attempt::checkpoint_all() {
  Phase ph = phase("checkpoint");
  auto failed = toggle_all(c_->cuda, o_.cfg_.parallelism, [&](pid_t pid) {
    o_.ensure_held(pid, "checkpoint");
    o_.toggler_->checkpoint(pid);
    toggled_.record(pid, CudaState::Checkpointed);
  });
  // Every failure is the answer of a process that is ending (a job runner's worker): locked, it
  // cannot finish its exit (measured under runsc: it ended only once the rollback let it go), so
  // the attempt is undone and made again, from a scan that no longer finds it.
  if (may_retry_ && !failed.empty() &&
      std::all_of(failed.begin(), failed.end(), [](const auto& f) { return answers_as_ending(f.second.driver_code()); })) {
    Again again{.pids = pids_of(failed), .ending = true};
    ph.done("pids " + comma_list(again.pids) + " ending, made again");
    return again;
  }
  auto ended = drop_ended(failed, "checkpoint");
  ph.done(count_processes(c_->cuda.size()) + ", " + parallelism_text(o_.cfg_.parallelism) +
          (ended.empty() ? "" : ", " + comma_list(ended) + " ended meanwhile"));
  if (!failed.empty())
    throw rollback(failure_rows(failed), Code::FailedPrecondition, "failed",
                   "CUDA checkpoint failed in " + count_processes(failed.size()));
  return std::nullopt;
}

void Orchestrator::Attempt::resume() {
  out_.toggled = c_->cuda;
  std::sort(out_.toggled.begin(), out_.toggled.end());
  toggled_.release();  // from here, a process that does not come back is reported, not rolled back
  if (!req_.keep_running) return;
  Phase ph = phase("resume");
  Resumed r = o_.bring_back(out_.toggled, toggled_.believed());
  ph.done("resumed " + comma_list(r.running));
  if (r.stuck.empty()) return;
  diag_.rolled_back = r.running;
  diag_.stuck = r.stuck;
  throw fail(Code::Internal, "failed",
             "the checkpoint was written, but CUDA could not be resumed in " + count_processes(r.stuck.size()));
}

std::vector<ProcessReport> Orchestrator::Attempt::failure_rows(const std::map<pid_t, CudaError>& failed) {
  std::vector<ProcessReport> rows;
  for (const auto& [pid, e] : failed) {
    ProcessReport r = o_.report_for(pid, c_->holders.at(pid));
    r.cuda_state = "(" + e.op() + " failed)";
    r.hint = hint_toggle_failed(e, o_.cfg_.lock_timeout_ms);
    rows.push_back(std::move(r));
  }
  return rows;
}

// A process that ended between the scan and its toggle (a job runner's short-lived worker) is not
// a failure: it is left out, with a log line, and the checkpoint goes on without it.
std::vector<pid_t> Orchestrator::Attempt::drop_ended(std::map<pid_t, CudaError>& failed, const char* before) {
  std::vector<pid_t> ended;
  // Only a process that answered as an ending one does is waited for; the others are asked once.
  bool ending =
      std::any_of(failed.begin(), failed.end(), [](const auto& f) { return answers_as_ending(f.second.driver_code()); });
  auto gone = o_.ended_among(pids_of(failed), ending ? kEndingGrace : std::chrono::milliseconds(0));
  for (auto it = failed.begin(); it != failed.end();) {
    auto g = gone.find(it->first);
    std::string why = g == gone.end() ? std::string() : g->second;
    if (why.empty()) {
      ++it;
      continue;
    }
    o_.log_.info("checkpoint " + id_ + ": pid " + std::to_string(it->first) + " ended before its CUDA " + before + " (" + why +
                 "); left out");
    ended.push_back(it->first);
    std::erase(c_->cuda, it->first);
    it = failed.erase(it);
  }
  return ended;
}

}  // namespace nvproxy::checkpoint
