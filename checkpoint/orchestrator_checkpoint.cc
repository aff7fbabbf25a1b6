// Orchestrator::checkpoint: the checkpoint as named phases (orchestrator.h):
//
//   scan -> classify -> decide (runtime, blockers, preflight, tree, space) -> lock all ->
//   checkpoint all -> verify -> snapshot -> resume
//
// An Attempt carries one checkpoint's report (every way out writes it); a Toggled guard owns what
// was toggled from the first lock on, so that no way out leaves a process locked or checkpointed.
#include <algorithm>
#include <mutex>

#include "checkpoint/hints.h"
#include "checkpoint/orchestrator.h"
#include "checkpoint/orchestrator_parts.h"
#include "common/fs.h"
#include "common/process.h"

namespace nvproxy::checkpoint {

namespace fs = std::filesystem;
using namespace detail;

class Orchestrator::Attempt {
 public:
  Attempt(Orchestrator& o, const CheckpointRequest& r) : req(r), o_(o) {
    diag.container = r.container_id;
    std::error_code ec;
    if (!r.diagnostic_path.empty()) fs::remove(r.diagnostic_path, ec);  // a stale one would mislead
  }
  Phase phase(const std::string& name) { return {out.phases, o_.log_, req.container_id, name}; }

  // Every refusal and failure ends here: the JSON written, the text returned to throw.
  Error fail(Code code, std::string verdict, std::string reason) {
    diag.verdict = std::move(verdict);
    diag.reason = std::move(reason);
    diag.phases = out.phases;
    diag.warnings.insert(diag.warnings.end(), out.warnings.begin(), out.warnings.end());
    std::string text = render_text(diag);
    if (!req.diagnostic_path.empty()) {
      try {
        nlohmann::json j = to_json(diag);
        if (deadline) j["deadline"] = *deadline;
        write_file_atomic(req.diagnostic_path, j.dump(2) + "\n");
      } catch (const std::exception& e) {
        o_.log_.warn("checkpoint " + req.container_id + ": cannot write the diagnostic: " + e.what());
      }
    }
    o_.log_.warn(text);
    while (!text.empty() && text.back() == '\n') text.pop_back();
    return {code, text};
  }

  // The report of a checkpoint that succeeded (same file and shape as a refusal's, verdict "done").
  void done() {
    if (req.diagnostic_path.empty()) return;
    diag.verdict = "done";
    diag.reason = count_processes(out.toggled.size()) + " with CUDA state checkpointed";
    if (!out.released.empty())
      diag.reason +=
          "; the GPU device files " + count_processes(out.released.size()) + " inherited from them left out of the image";
    diag.toggled = out.toggled;
    diag.phases = out.phases;
    diag.warnings.insert(diag.warnings.end(), out.warnings.begin(), out.warnings.end());
    try {
      write_json(diag, req.diagnostic_path);
    } catch (const std::exception& e) {
      o_.log_.warn("checkpoint " + req.container_id + ": cannot write the report: " + e.what());
    }
  }

  const CheckpointRequest& req;
  CheckpointOutcome out;
  Diagnostic diag;
  std::optional<nlohmann::json> deadline;  // the snapshot ran out of time: phase, command, timeout

 private:
  Orchestrator& o_;
};

// `believed` is the state each pid was put in; the driver is asked again when rolling back.
class Orchestrator::Toggled {
 public:
  Toggled(Orchestrator& o, Attempt& a) : o_(o), a_(a) {}
  ~Toggled() {
    if (released_ || believed_.empty()) return;
    // Only an exception nobody expected gets here: bring the processes back all the same.
    Resumed r = o_.bring_back(pids(), believed_);
    o_.log_.error("checkpoint " + a_.req.container_id + ": rolled back on an unexpected way out: running " +
                  comma_list(r.running) + (r.stuck.empty() ? "" : ", STUCK " + std::to_string(r.stuck.size())));
  }
  Toggled(const Toggled&) = delete;
  Toggled& operator=(const Toggled&) = delete;

  void record(pid_t pid, CudaState s) {
    std::lock_guard lk(mu_);
    believed_[pid] = s;
  }
  // A toggle that failed: its state is unknown, the rollback asks the driver.
  void unsure(pid_t pid) {
    std::lock_guard lk(mu_);
    believed_.emplace(pid, CudaState::Running);
  }
  [[nodiscard]] bool toggled(pid_t pid) const { return believed_.count(pid) > 0; }
  [[nodiscard]] const std::map<pid_t, CudaState>& believed() const { return believed_; }

  // Restores everything toggled and returns the attempt's error. summarize: the reason ends with
  // what the rollback did ("CUDA restored in pids 4,5").
  Error rollback(std::vector<ProcessReport> rows, Code code, std::string verdict, std::string reason, bool summarize = false) {
    Phase rb = a_.phase("rollback");
    Resumed r = o_.bring_back(pids(), believed_);
    released_ = true;
    rb.done("restored " + comma_list(r.running) + (r.stuck.empty() ? "" : ", STUCK " + std::to_string(r.stuck.size())));
    if (summarize) {
      if (!r.running.empty()) reason += "; CUDA restored in pids " + comma_list(r.running);
      if (!r.stuck.empty()) {
        std::vector<pid_t> stuck;
        for (const auto& p : r.stuck) stuck.push_back(p.pid);
        reason += "; CUDA could NOT be restored in pids " + comma_list(stuck);
      }
    }
    a_.diag.processes = std::move(rows);
    a_.diag.rolled_back = r.running;
    a_.diag.stuck = r.stuck;
    return a_.fail(code, std::move(verdict), std::move(reason));
  }
  // The snapshot is written: what becomes of the toggled processes is resume()'s business.
  void release() { released_ = true; }

 private:
  std::vector<pid_t> pids() const {
    std::vector<pid_t> v;
    for (const auto& [pid, _] : believed_) v.push_back(pid);
    return v;
  }
  Orchestrator& o_;
  Attempt& a_;
  std::mutex mu_;
  std::map<pid_t, CudaState> believed_;
  bool released_ = false;
};

CheckpointOutcome Orchestrator::checkpoint(const CheckpointRequest& req, const ReleasingSnapshotFn& snapshot) {
  Attempt a(*this, req);
  const std::string& id = req.container_id;
  std::vector<pid_t> pids;
  std::vector<Holder> holders;
  if (!toggler_) {
    log_.info("checkpoint " + id + ": CUDA toggling is off (checkpoint.cuda: none)");
    if (snapshot_check_) pids = lister_.list();
  } else {
    Phase scan = a.phase("scan");
    pids = lister_.list();
    if (holds_) holds_->hold(pids);
    holders = scanner_.scan(pids);
    scan.done(count_processes(pids.size()) + ", " + std::to_string(holders.size()) + " device holders");
  }
  std::optional<Classified> c;
  if (!holders.empty()) {
    Phase cls = a.phase("classify");
    c = classify(id, holders);
    cls.done("CUDA pids " + comma_list(c->cuda));
  }

  Decision d = decide(req, pids, c ? &*c : nullptr, a.out.phases);
  for (const auto& [k, v] : d.details.items()) a.diag.details[k] = v;
  a.out.warnings = d.warnings;
  if (d.refusal) {
    a.diag.processes.insert(a.diag.processes.end(), d.refusal->processes.begin(), d.refusal->processes.end());
    throw a.fail(Code::FailedPrecondition, "refused", d.refusal->reason);
  }
  for (const auto& w : a.out.warnings) log_.warn("checkpoint " + id + ": " + w);
  a.out.lost = d.lost;
  if (!c) {
    snapshot_only(a, snapshot);
    a.done();
    return a.out;
  }

  if (!c->release.empty()) {
    a.out.released = c->release.processes;
    nlohmann::json rel = nlohmann::json::array();
    for (const auto& p : c->release.processes)
      rel.push_back({{"pid", p.pid}, {"from", p.from}, {"fds", p.fds}, {"mappings", p.mappings}});
    a.diag.details["released"] = {{"processes", rel}, {"devices", c->release.devices_text()}};
  }
  Toggled t(*this, a);
  try {
    lock_all(a, *c, t);
    checkpoint_all(a, *c, t);
    verify(a, pids, *c, t);
    take_snapshot(a, snapshot, c->release, t);
  } catch (const Error& e) {
    // Failures of the phases carry their diagnostic; anything else (the CUDA API gone, a scan
    // error) still must not leave processes toggled.
    if (a.diag.verdict.empty()) throw t.rollback({}, e.code(), "failed", e.what());
    throw;
  } catch (const std::exception& e) {
    throw t.rollback({}, Code::Internal, "failed", e.what());
  }
  a.out.toggled = c->cuda;
  std::sort(a.out.toggled.begin(), a.out.toggled.end());
  resume(a, a.out.toggled, t);
  a.done();
  return a.out;
}

std::vector<ProcessReport> Orchestrator::failure_rows(const Classified& c, const std::map<pid_t, CudaError>& failed) {
  std::vector<ProcessReport> rows;
  for (const auto& [pid, e] : failed) {
    ProcessReport r = report_for(pid, c.holders.at(pid));
    r.cuda_state = "(" + e.op() + " failed)";
    r.hint = hint_toggle_failed(e, cfg_.lock_timeout_ms);
    rows.push_back(std::move(r));
  }
  return rows;
}

void Orchestrator::lock_all(Attempt& a, const Classified& c, Toggled& t) {
  Phase lock = a.phase("lock");
  auto failed = toggle_all(c.cuda, 0, [&](pid_t pid) {
    // Locks are quick (measured 0.3 ms) and bounded by the timeout: always all at once, so every
    // process is quiesced before any is checkpointed.
    ensure_held(pid, "lock");
    toggler_->lock(pid, cfg_.lock_timeout_ms);
    t.record(pid, CudaState::Locked);
  });
  lock.done(count_processes(c.cuda.size()));
  for (const auto& [pid, _] : failed) t.unsure(pid);
  if (!failed.empty())
    throw t.rollback(failure_rows(c, failed), Code::FailedPrecondition, "failed",
                     "CUDA lock failed in " + count_processes(failed.size()));
}

void Orchestrator::checkpoint_all(Attempt& a, const Classified& c, Toggled& t) {
  Phase ckpt = a.phase("checkpoint");
  auto failed = toggle_all(c.cuda, cfg_.parallelism, [&](pid_t pid) {
    ensure_held(pid, "checkpoint");
    toggler_->checkpoint(pid);
    t.record(pid, CudaState::Checkpointed);
  });
  ckpt.done(count_processes(c.cuda.size()) + ", " + parallelism_text(cfg_.parallelism));
  if (!failed.empty())
    throw t.rollback(failure_rows(c, failed), Code::FailedPrecondition, "failed",
                     "CUDA checkpoint failed in " + count_processes(failed.size()));
}

void Orchestrator::verify(Attempt& a, const std::vector<pid_t>& pids, const Classified& c, Toggled& t) {
  Phase verify = a.phase("verify");
  std::vector<pid_t> now = lister_.list();  // a process started meanwhile counts too
  auto left = by_pid(scanner_.scan(now));
  // What the snapshot releases may remain: a released process's inherited fds and its mappings of
  // the released devices, nothing more.
  std::size_t released = 0;
  for (const auto& p : c.release.processes) {
    auto it = left.find(p.pid);
    if (it == left.end()) continue;
    bool only_released = std::all_of(it->second.begin(), it->second.end(), [&](const Holder& h) {
      // By number where the scan saw one (the host), else by path (a sandbox's scan).
      bool dev = h.device != 0 ? std::binary_search(c.release.devices.begin(), c.release.devices.end(), h.device)
                               : std::find(p.paths.begin(), p.paths.end(), h.path) != p.paths.end();
      return dev && (h.kind == HolderKind::Mapping || std::find(p.fds.begin(), p.fds.end(), h.fd) != p.fds.end());
    });
    if (!only_released) continue;
    left.erase(it);
    ++released;
  }
  verify.done(std::to_string(left.size()) + " holders left" +
              (released ? ", " + count_processes(released) + " with inherited files to release" : ""));
  if (left.empty()) return;
  std::vector<ProcessReport> rows;
  for (const auto& [pid, hs] : left) {
    ProcessReport r = report_for(pid, hs);
    try {
      r.cuda_state = state_name(toggler_->get_state(pid));
    } catch (const std::exception&) {
      r.cuda_state = "(no CUDA)";
    }
    r.hint =
        hint_still_holds(pid, r.cuda_state, hs.front().path, t.toggled(pid), std::binary_search(pids.begin(), pids.end(), pid));
    rows.push_back(std::move(r));
  }
  throw t.rollback(
      std::move(rows), Code::FailedPrecondition, "refused",
      count_processes(left.size()) + (left.size() == 1 ? " still holds" : " still hold") + " GPU devices after CUDA toggle");
}

void Orchestrator::take_snapshot(Attempt& a, const ReleasingSnapshotFn& snapshot, const ReleasePlan& plan, Toggled& t) {
  Phase snap = a.phase("snapshot");
  try {
    snapshot(plan);
  } catch (const Error& e) {
    if (e.code() == Code::DeadlineExceeded) {
      snap.done("out of time");
      SnapshotDeadline d = snapshot_deadline(e);
      a.deadline = d.json;
      throw t.rollback({}, Code::DeadlineExceeded, "failed", d.reason, true);
    }
    snap.done("failed");
    throw t.rollback({}, e.code(), "failed", std::string("the runtime's checkpoint failed: ") + e.what());
  } catch (const std::exception& e) {
    snap.done("failed");
    throw t.rollback({}, Code::Internal, "failed", std::string("the runtime's checkpoint failed: ") + e.what());
  }
}

// The snapshot alone (nothing toggled): its errors pass through, but a deadline is written down.
void Orchestrator::snapshot_only(Attempt& a, const ReleasingSnapshotFn& snapshot) {
  Phase ph = a.phase("snapshot");
  try {
    snapshot(ReleasePlan{});
  } catch (const Error& e) {
    if (e.code() != Code::DeadlineExceeded) throw;
    ph.done("out of time");
    SnapshotDeadline d = snapshot_deadline(e);
    a.deadline = d.json;
    throw a.fail(Code::DeadlineExceeded, "failed", d.reason + "; no CUDA process was toggled");
  }
}

void Orchestrator::resume(Attempt& a, const std::vector<pid_t>& toggled, Toggled& t) {
  t.release();  // from here, a process that does not come back is reported, not rolled back
  if (!a.req.keep_running) return;
  Phase res = a.phase("resume");
  Resumed r = bring_back(toggled, t.believed());
  res.done("resumed " + comma_list(r.running));
  if (r.stuck.empty()) return;
  a.diag.rolled_back = r.running;
  a.diag.stuck = r.stuck;
  throw a.fail(Code::Internal, "failed",
               "the checkpoint was written, but CUDA could not be resumed in " + count_processes(r.stuck.size()));
}

}  // namespace nvproxy::checkpoint
