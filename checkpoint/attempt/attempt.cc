// Orchestrator::Attempt: its report, and the phases before anything is toggled (attempt.h).
#include "checkpoint/attempt/attempt.h"

#include <algorithm>

#include "common/fs.h"

namespace nvproxy::checkpoint {

namespace fs = std::filesystem;
using namespace detail;

Orchestrator::Attempt::Attempt(Orchestrator& o, const CheckpointRequest& req, bool may_retry, NotCudaSeen& seen)
    : o_(o),
      req_(req),
      id_(req.container_id),
      may_retry_(may_retry),
      seen_(seen),
      hold_(o.can_.holds_still ? o.hold_ : nullptr, o.log_, req.container_id),
      toggled_(o, req.container_id) {
  diag_.container = req.container_id;
  std::error_code ec;
  if (!req.diagnostic_path.empty()) fs::remove(req.diagnostic_path, ec);  // a stale one would mislead
}

Phase Orchestrator::Attempt::phase(const std::string& name) {
  return {out_.phases, o_.log_, id_, name};
}

Error Orchestrator::Attempt::fail(Code code, std::string verdict, std::string reason) {
  diag_.verdict = std::move(verdict);
  diag_.reason = std::move(reason);
  diag_.phases = out_.phases;
  diag_.warnings.insert(diag_.warnings.end(), out_.warnings.begin(), out_.warnings.end());
  std::string text = render_text(diag_);
  if (!req_.diagnostic_path.empty()) {
    try {
      nlohmann::json j = to_json(diag_);
      if (deadline_) j["deadline"] = *deadline_;
      write_file_atomic(req_.diagnostic_path, j.dump(2) + "\n");
    } catch (const std::exception& e) {
      o_.log_.warn("checkpoint " + id_ + ": cannot write the diagnostic: " + e.what());
    }
  }
  o_.log_.warn(text);
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return {code, text};
}

Error Orchestrator::Attempt::rollback(std::vector<ProcessReport> rows, Code code, std::string verdict, std::string reason,
                                      bool summarize) {
  Phase rb = phase("rollback");
  Resumed r = toggled_.bring_back_all();
  rb.done("restored " + comma_list(r.running) + (r.stuck.empty() ? "" : ", STUCK " + std::to_string(r.stuck.size())));
  if (summarize) {
    if (!r.running.empty()) reason += "; CUDA restored in pids " + comma_list(r.running);
    if (!r.stuck.empty()) {
      std::vector<pid_t> stuck;
      for (const auto& p : r.stuck) stuck.push_back(p.pid);
      reason += "; CUDA could NOT be restored in pids " + comma_list(stuck);
    }
  }
  diag_.processes = std::move(rows);
  diag_.rolled_back = r.running;
  diag_.stuck = r.stuck;
  return fail(code, std::move(verdict), std::move(reason));
}

Orchestrator::Again Orchestrator::Attempt::undo(Again again) {
  Resumed r = toggled_.bring_back_all();
  if (r.stuck.empty()) return again;
  diag_.rolled_back = r.running;
  diag_.stuck = r.stuck;
  throw fail(Code::Internal, "failed", "CUDA could not be brought back before the next attempt");
}

// The report of a checkpoint that succeeded (same file and shape as a refusal's, verdict "done").
void Orchestrator::Attempt::done() {
  if (req_.diagnostic_path.empty()) return;
  diag_.verdict = "done";
  diag_.reason = count_processes(out_.toggled.size()) + " with CUDA state checkpointed";
  if (!out_.released.empty())
    diag_.reason +=
        "; the GPU device files " + count_processes(out_.released.size()) + " inherited from them left out of the image";
  diag_.toggled = out_.toggled;
  diag_.phases = out_.phases;
  diag_.warnings.insert(diag_.warnings.end(), out_.warnings.begin(), out_.warnings.end());
  try {
    write_json(diag_, req_.diagnostic_path);
  } catch (const std::exception& e) {
    o_.log_.warn("checkpoint " + id_ + ": cannot write the report: " + e.what());
  }
}

std::variant<CheckpointOutcome, Orchestrator::Again> Orchestrator::Attempt::run(const ReleasingSnapshotFn& snapshot) {
  scan();
  classify();
  if (auto again = decide()) return *again;  // nothing toggled yet: nothing to undo
  out_.lost = d_.lost;
  if (!c_) {
    snapshot_only(snapshot);
    done();
    return out_;
  }
  if (!c_->release.empty()) {
    out_.released = c_->release.processes;
    nlohmann::json rel = nlohmann::json::array();
    for (const auto& p : c_->release.processes)
      rel.push_back({{"pid", p.pid}, {"from", p.from}, {"fds", p.fds}, {"mappings", p.mappings}});
    diag_.details["released"] = {{"processes", rel}, {"devices", c_->release.devices_text()}};
  }
  hold_staging();
  // From the first lock to the snapshot (the phases' own files); Again ends the attempt early,
  // everything toggled brought back.
  std::optional<Again> again;
  try {
    lock_all();
    // A process listed at the scan may have opened the devices since (a worker importing its
    // libraries then): newcomers are told by what held devices at the scan, not by what was listed.
    std::vector<pid_t> holders_at_scan;
    for (const auto& [pid, _] : c_->holders) holders_at_scan.push_back(pid);
    if (auto fresh = hold_still(holders_at_scan); !fresh.empty()) again = take_in_newcomers(std::move(fresh));
    if (!again) again = checkpoint_all();
    if (!again) again = verify();
    if (!again && !d_.space_as_allocated.empty())
      if (auto r = o_.space_as_written(req_, pids_, *c_, d_.space_as_allocated, diag_.details, out_.phases))
        throw rollback(std::move(r->processes), Code::FailedPrecondition, "refused", r->reason, true);
    if (!again) again = take_snapshot(snapshot);
  } catch (const Error& e) {
    // Failures of the phases carry their diagnostic; anything else (the CUDA API gone, a scan
    // error) still must not leave processes toggled.
    if (diag_.verdict.empty()) throw rollback({}, e.code(), "failed", e.what());
    throw;
  } catch (const std::exception& e) {
    throw rollback({}, Code::Internal, "failed", e.what());
  }
  if (again) return undo(std::move(*again));
  if (!resumed_early_) resume();
  staging_.end();
  done();
  return out_;
}

void Orchestrator::Attempt::scan() {
  if (!o_.can_.toggles_cuda) {
    o_.log_.info("checkpoint " + id_ + ": CUDA toggling is off (checkpoint.cuda: none)");
    if (o_.can_.checks_snapshot) pids_ = o_.lister_.list();
    return;
  }
  Phase ph = phase("scan");
  pids_ = o_.lister_.list();
  if (o_.can_.guards_pids) o_.holds_->hold(pids_);
  holders_ = o_.scanner_.scan(pids_);
  ph.done(count_processes(pids_.size()) + ", " + std::to_string(holders_.size()) + " device holders");
}

void Orchestrator::Attempt::classify() {
  if (holders_.empty()) return;
  Phase ph = phase("classify");
  c_ = o_.classify(id_, holders_);
  ph.done("CUDA pids " + comma_list(c_->cuda));
  // A holder without CUDA that has ended since the scan holds nothing any more: a job's worker,
  // as the classification takes seconds in a loaded sandbox.
  std::vector<pid_t> no_cuda;
  for (const auto& r : c_->blockers)
    if (r.cuda_state == "(no CUDA)") no_cuda.push_back(r.pid);
  auto gone = o_.ended_among(no_cuda, std::chrono::milliseconds(0));
  if (gone.empty()) return;
  std::erase_if(c_->blockers, [&](const ProcessReport& r) { return gone.contains(r.pid); });
  for (const auto& [pid, _] : gone) {
    c_->holders.erase(pid);
    c_->state_error.erase(pid);
  }
  o_.log_.info("checkpoint " + id_ + ": pids " + comma_list(pids_of(gone)) +
               " held GPU devices without CUDA at the scan and have ended since; left out");
  if (c_->holders.empty()) c_.reset();
}

std::optional<Orchestrator::Again> Orchestrator::Attempt::decide() {
  d_ = o_.decide(req_, pids_, c_ ? &*c_ : nullptr, out_.phases);
  for (const auto& [k, v] : d_.details.items()) diag_.details[k] = v;
  out_.warnings = d_.warnings;
  if (d_.refusal && c_ && only_passing_holders()) {
    Again again{.not_cuda = true};
    for (const auto& r : c_->blockers) again.pids.push_back(r.pid);
    return again;
  }
  if (d_.refusal) {
    diag_.processes.insert(diag_.processes.end(), d_.refusal->processes.begin(), d_.refusal->processes.end());
    throw fail(Code::FailedPrecondition, "refused", d_.refusal->reason);
  }
  for (const auto& w : out_.warnings) o_.log_.warn("checkpoint " + id_ + ": " + w);
  return std::nullopt;
}

// True when every blocker is a holder without CUDA first seen less than kStartingGrace ago (and the
// rescans' deadline has not passed): a job runner's worker between the opening of its device and
// cuInit, or between its CUDA teardown and its exit.
bool Orchestrator::Attempt::only_passing_holders() {
  const auto& blockers = c_->blockers;
  if (blockers.empty() ||
      !std::all_of(blockers.begin(), blockers.end(), [](const ProcessReport& r) { return r.cuda_state == "(no CUDA)"; }))
    return false;
  // Those that ended since the scan were left out right after the classification.
  const auto now = Clock::now();
  bool passing = now < seen_.rescan_until;
  for (const auto& r : blockers)
    if (now - seen_.since.try_emplace(r.pid, now).first->second >= kStartingGrace) passing = false;
  return passing;
}

// The host's reservation taken and the plan's limits lifted (staging_hold.h); the attempt's
// refusal when the host's room is gone meanwhile or a lift fails.
void Orchestrator::Attempt::hold_staging() {
  if (!o_.can_.bills_staging || !d_.staging) return;
  try {
    staging_ = checkpoint::hold_staging(*d_.staging, d_.bill,
                                        {.probe = o_.memory_, .reservations = o_.reservations_, .record = req_.lift_record}, id_,
                                        "checkpoint", o_.log_);
  } catch (const Error& e) {
    for (pid_t p : c_->cuda) {
      ProcessReport rep = o_.report_for(p, c_->holders.at(p));
      rep.cuda_state = "running";
      diag_.processes.push_back(std::move(rep));
    }
    throw fail(e.code(), "refused", e.what());
  }
}

}  // namespace nvproxy::checkpoint
