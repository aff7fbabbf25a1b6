// Orchestrator::checkpoint_around: the checkpoint as named phases (orchestrator.h):
//
//   scan -> classify -> decide (runtime, blockers, preflight, tree, space) -> lock all -> hold ->
//   checkpoint all -> verify -> snapshot -> resume
//
// An Attempt carries one checkpoint's report (every way out writes it); a Toggled guard owns what
// was toggled from the first lock on, so that no way out leaves a process locked or checkpointed;
// a HoldGuard owns the container's hold (container_hold.h), so that none leaves it stopped.
#include <algorithm>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>

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
  // Before another attempt: everything toggled brought back. A process that stays stuck ends the
  // checkpoint here, as any rollback would.
  void undo_for_retry() {
    Resumed r = o_.bring_back(pids(), believed_);
    released_ = true;
    if (r.stuck.empty()) return;
    a_.diag.rolled_back = r.running;
    a_.diag.stuck = r.stuck;
    throw a_.fail(Code::Internal, "failed", "CUDA could not be brought back before the next attempt");
  }

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

// From the hold to the end of the attempt nothing of the container runs but what the driver needs;
// the destructor lets it all go (after the Toggled guard, declared later, has brought CUDA back).
class Orchestrator::HoldGuard {
 public:
  HoldGuard(ContainerHold* h, Logger& log, std::string id) : h_(h), log_(log), id_(std::move(id)) {}
  ~HoldGuard() { let_go(); }
  HoldGuard(const HoldGuard&) = delete;
  HoldGuard& operator=(const HoldGuard&) = delete;

  [[nodiscard]] bool on() const { return h_ != nullptr; }
  std::vector<pid_t> hold(const std::vector<pid_t>& pids) {
    held_ = true;
    return h_->hold(pids);
  }
  // These alone go on (newcomers let run to their CUDA init); hold() takes them back.
  void release(const std::vector<pid_t>& pids) { h_->release(pids); }
  // The runtime's snapshot seizes the processes itself: frozen first, then no longer held by us.
  void hand_to_runtime() {
    h_->freeze();
    frozen_ = true;
    h_->release();
    held_ = false;
  }
  // After the snapshot, or its failure: held again, then thawed (a frozen thread stops once
  // thawed, before it runs any of its own code); still nothing runs.
  void take_back(const std::vector<pid_t>& pids) {
    held_ = true;
    h_->hold_frozen(pids);
    h_->thaw();
    frozen_ = false;
    h_->settle();
  }
  // The runtime ended the container with its snapshot (not kept running): nothing to thaw.
  void container_ended() { frozen_ = false; }

 private:
  void let_go() noexcept {
    if (held_) try {
        h_->release();
      } catch (const std::exception& e) {
        log_.error("checkpoint " + id_ + ": could not let the held processes go: " + e.what());
      }
    if (frozen_) try {
        h_->thaw();
      } catch (const std::exception& e) {
        log_.error("checkpoint " + id_ + ": could not thaw the container: " + e.what());
      }
    held_ = frozen_ = false;
  }
  ContainerHold* h_;
  Logger& log_;
  std::string id_;
  bool held_ = false, frozen_ = false;
};

// A process that holds GPU devices and started after the scan (a job runner's next worker) was not
// locked: the attempt is undone (locks only, nothing is checkpointed yet) and made again, from a
// scan that sees it. The last attempt lets verify() refuse it as any other holder.
// The same for holders that are not CUDA processes yet or any more: one between the opening of its
// device and the end of cuInit, or between its CUDA teardown and its exit, is a moment's state; a
// monitoring tool's is not. The scan is made again a moment later, and the last one decides.
struct Orchestrator::Newcomers {
  std::vector<pid_t> pids;
  bool not_cuda = false;  // holders without CUDA, refused before anything was toggled
  bool ending = false;    // CUDA processes whose checkpoint failed as they ended
};

namespace {
template <class V>
std::vector<pid_t> pids_of(const std::map<pid_t, V>& m) {
  std::vector<pid_t> out;
  for (const auto& [pid, _] : m) out.push_back(pid);
  return out;
}
}  // namespace
constexpr int kAttemptsWithNewcomers = 4;
constexpr auto kNotCudaRescanAfter = std::chrono::milliseconds(200);

CheckpointOutcome Orchestrator::checkpoint_around(const CheckpointRequest& req, const ReleasingSnapshotFn& snapshot) {
  // A workload the kernel kills during the checkpoint is named as such, whatever phase then failed
  // and in whichever attempt: its own words (a stop that timed out, a process gone) would guess.
  std::optional<OomBaseline> oom;
  if (memory_ && toggler_) oom = oom_baseline(*memory_, req.init_pid > 0 ? memory_->memory_cgroup(req.init_pid) : "");
  // Limits an earlier shim lifted and could not put back go back before any attempt's bill reads them.
  if (memory_ && !req.lift_record.empty())
    put_back_recorded(*memory_, req.lift_record, log_, "checkpoint of \"" + req.container_id + "\"");
  try {
    return checkpoint_attempts(req, snapshot);
  } catch (const Error& e) {
    std::string cause = oom ? oom_cause(*memory_, *oom) : "";
    if (cause.empty()) throw;
    log_.warn("checkpoint " + req.container_id + ": " + cause);
    throw Error(e.code(), "checkpoint of \"" + req.container_id + "\" failed: " + cause + "; then: " + e.what());
  }
}

CheckpointOutcome Orchestrator::checkpoint_attempts(const CheckpointRequest& req, const ReleasingSnapshotFn& snapshot) {
  NotCudaSeen seen{.rescan_until = Clock::now() + kNotCudaRescanFor};
  for (int attempt = 1;;) {
    try {
      return checkpoint_once(req, snapshot, attempt < kAttemptsWithNewcomers, seen);
    } catch (const Newcomers& n) {
      if (n.not_cuda) {  // bounded by seen.rescan_until, not by the attempts
        log_.info("checkpoint " + req.container_id + ": pids " + comma_list(n.pids) +
                  " hold GPU devices without CUDA (starting or ending?); scanning again in " +
                  std::to_string(kNotCudaRescanAfter.count()) + " ms");
        std::this_thread::sleep_for(kNotCudaRescanAfter);
        continue;
      }
      if (n.ending) {
        log_.info("checkpoint " + req.container_id + ": pids " + comma_list(n.pids) +
                  " answered their CUDA checkpoint as ending processes do (OPERATING_SYSTEM); CUDA brought back, "
                  "scanning again");
      } else {
        log_.info("checkpoint " + req.container_id + ": " + count_processes(n.pids.size()) + " holding GPU devices (pids " +
                  comma_list(n.pids) + ") started during attempt " + std::to_string(attempt) +
                  "; its CUDA locks undone, scanning again");
      }
      ++attempt;
    }
  }
}

bool Orchestrator::only_passing_holders(const Classified& c, NotCudaSeen& seen) {
  if (c.blockers.empty() ||
      !std::all_of(c.blockers.begin(), c.blockers.end(), [](const ProcessReport& r) { return r.cuda_state == "(no CUDA)"; }))
    return false;
  // Those that ended since the scan were left out right after the classification.
  const auto now = Clock::now();
  bool passing = now < seen.rescan_until;
  for (const auto& r : c.blockers)
    if (now - seen.since.try_emplace(r.pid, now).first->second >= kStartingGrace) passing = false;
  return passing;
}

CheckpointOutcome Orchestrator::checkpoint_once(const CheckpointRequest& req, const ReleasingSnapshotFn& snapshot, bool may_retry,
                                                NotCudaSeen& seen) {
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
    // A holder without CUDA that has ended since the scan holds nothing any more: a job's worker,
    // as the classification takes seconds in a loaded sandbox.
    std::vector<pid_t> no_cuda;
    for (const auto& r : c->blockers)
      if (r.cuda_state == "(no CUDA)") no_cuda.push_back(r.pid);
    if (auto gone = ended_among(no_cuda, std::chrono::milliseconds(0)); !gone.empty()) {
      std::erase_if(c->blockers, [&](const ProcessReport& r) { return gone.contains(r.pid); });
      for (const auto& [pid, _] : gone) {
        c->holders.erase(pid);
        c->state_error.erase(pid);
      }
      log_.info("checkpoint " + id + ": pids " + comma_list(pids_of(gone)) +
                " held GPU devices without CUDA at the scan and have ended since; left out");
      if (c->holders.empty()) c.reset();
    }
  }

  Decision d = decide(req, pids, c ? &*c : nullptr, a.out.phases);
  for (const auto& [k, v] : d.details.items()) a.diag.details[k] = v;
  a.out.warnings = d.warnings;
  if (d.refusal && c && only_passing_holders(*c, seen)) {
    Newcomers n{.not_cuda = true};
    for (const auto& r : c->blockers) n.pids.push_back(r.pid);
    throw n;
  }
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
  // Outlives the toggles' guard: the limits go back once CUDA is back in every process.
  StagingHold staging = hold_staging_for(a, d, *c);
  HoldGuard h(toggler_ && hold_ ? hold_ : nullptr, log_, id);
  Toggled t(*this, a);
  try {
    lock_all(a, *c, t);
    std::set<pid_t> held;
    // A process listed at the scan may have opened the devices since (a worker importing its
    // libraries then): newcomers are told by what held devices at the scan, not by what was listed.
    std::vector<pid_t> holders_at_scan;
    for (const auto& [pid, _] : c->holders) holders_at_scan.push_back(pid);
    if (auto fresh = hold_still(a, h, t, held, holders_at_scan); !fresh.empty())
      take_in_newcomers(a, h, *c, t, held, std::move(fresh), may_retry);
    checkpoint_all(a, *c, t, may_retry);
    verify(a, pids, *c, t, may_retry);
    if (!d.space_as_allocated.empty())
      if (auto r = space_as_written(req, pids, *c, d.space_as_allocated, a.diag.details, a.out.phases))
        throw t.rollback(std::move(r->processes), Code::FailedPrecondition, "refused", r->reason, true);
    take_snapshot(a, snapshot, *c, h, t, may_retry);
  } catch (const Newcomers&) {
    t.undo_for_retry();
    throw;
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
  staging.end();
  a.done();
  return a.out;
}

StagingHold Orchestrator::hold_staging_for(Attempt& a, const Decision& d, const Classified& c) {
  if (!memory_ || !d.staging) return {};
  try {
    return hold_staging(*d.staging, d.bill, {.probe = memory_, .reservations = reservations_, .record = a.req.lift_record},
                        a.req.container_id, "checkpoint", log_);
  } catch (const Error& e) {
    for (pid_t p : c.cuda) {
      ProcessReport rep = report_for(p, c.holders.at(p));
      rep.cuda_state = "running";
      a.diag.processes.push_back(std::move(rep));
    }
    throw a.fail(e.code(), "refused", e.what());
  }
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

// A process that ended between the scan and its toggle (a job runner's short-lived worker) is not
// a failure: it is left out, with a log line, and the checkpoint goes on without it.
std::vector<pid_t> Orchestrator::drop_ended(Attempt& a, Classified& c, std::map<pid_t, CudaError>& failed, const char* before) {
  std::vector<pid_t> ended;
  // Only a process that answered as an ending one does is waited for; the others are asked once.
  bool ending =
      std::any_of(failed.begin(), failed.end(), [](const auto& f) { return answers_as_ending(f.second.driver_code()); });
  auto gone = ended_among(pids_of(failed), ending ? kEndingGrace : std::chrono::milliseconds(0));
  for (auto it = failed.begin(); it != failed.end();) {
    auto g = gone.find(it->first);
    std::string why = g == gone.end() ? std::string() : g->second;
    if (why.empty()) {
      ++it;
      continue;
    }
    log_.info("checkpoint " + a.req.container_id + ": pid " + std::to_string(it->first) + " ended before its CUDA " + before +
              " (" + why + "); left out");
    ended.push_back(it->first);
    c.cuda.erase(std::remove(c.cuda.begin(), c.cuda.end(), it->first), c.cuda.end());
    it = failed.erase(it);
  }
  return ended;
}

void Orchestrator::lock_all(Attempt& a, Classified& c, Toggled& t) {
  Phase lock = a.phase("lock");
  auto failed = toggle_all(c.cuda, 0, [&](pid_t pid) {
    // Locks are quick (measured 0.3 ms) and bounded by the timeout: always all at once, so every
    // process is quiesced before any is checkpointed.
    ensure_held(pid, "lock");
    toggler_->lock(pid, cfg_.lock_timeout_ms);
    t.record(pid, CudaState::Locked);
  });
  auto ended = drop_ended(a, c, failed, "lock");
  lock.done(count_processes(c.cuda.size()) + (ended.empty() ? "" : ", " + comma_list(ended) + " ended meanwhile"));
  for (const auto& [pid, _] : failed) t.unsure(pid);
  if (!failed.empty())
    throw t.rollback(failure_rows(c, failed), Code::FailedPrecondition, "failed",
                     "CUDA lock failed in " + count_processes(failed.size()));
}

// After the lock, every thread of the container stops (the driver's restore threads excepted, for
// its own calls): nothing can touch what the CUDA checkpoint takes away, and no process can end
// or start until the resume. A process started before its parent stopped is found by listing again.
// Returns the held processes that were not scanned and hold GPU devices (a job runner's new worker),
// with what they hold.
std::map<pid_t, std::vector<Holder>> Orchestrator::hold_still(Attempt& a, HoldGuard& h, Toggled& t, std::set<pid_t>& held,
                                                              const std::vector<pid_t>& scanned) {
  if (!h.on()) return {};
  Phase ph = a.phase("hold");
  std::set<pid_t> ended;
  try {
    for (int round = 0; round < 8; ++round) {
      std::vector<pid_t> fresh;
      for (pid_t p : lister_.list())
        if (!held.count(p)) fresh.push_back(p);
      if (fresh.empty()) break;
      for (pid_t p : h.hold(fresh)) ended.insert(p);
      held.insert(fresh.begin(), fresh.end());
    }
  } catch (const std::exception& e) {
    ph.done("failed");
    throw t.rollback({}, Code::FailedPrecondition, "failed",
                     std::string("the container could not be held still for its CUDA checkpoint: ") + e.what(), true);
  }
  for (pid_t p : ended) held.erase(p);
  ph.done(count_processes(held.size()) + " held still");
  std::vector<pid_t> fresh;
  for (pid_t p : held)
    if (std::find(scanned.begin(), scanned.end(), p) == scanned.end()) fresh.push_back(p);
  if (fresh.empty()) return {};
  return by_pid(scanner_.scan(fresh));
}

// Newcomers: processes that opened GPU devices after the scan, while the rest of the container
// was being locked. Each is let run alone (the rest stay held) until its CUDA init is done, locked
// as the others were, and held again; its own children are found by the next round. One that the
// scan's policy has to judge (no CUDA within kNewcomerInit, outside the init's tree, refused by
// the preflight), or a lock that fails, starts the attempt again from a scan that sees it; on the
// last attempt the verify phase refuses it as any other holder.
constexpr auto kNewcomerInit = std::chrono::milliseconds(1500);
constexpr auto kNewcomerPoll = std::chrono::milliseconds(20);

std::vector<pid_t> Orchestrator::when_cuda_running(std::vector<pid_t> waiting, const std::function<bool(pid_t)>& take) {
  auto deadline = Clock::now() + kNewcomerInit;
  std::vector<pid_t> unready;
  while (!waiting.empty()) {
    std::vector<pid_t> still;
    for (pid_t pid : waiting) {
      if (holds_ && !holds_->gone(pid).empty()) continue;
      try {
        if (toggler_->get_state(pid) != CudaState::Running) throw std::runtime_error("not running");
      } catch (const std::exception&) {
        still.push_back(pid);
        continue;
      }
      if (!take(pid)) unready.push_back(pid);
    }
    waiting.swap(still);
    if (waiting.empty() || Clock::now() >= deadline) break;
    std::this_thread::sleep_for(kNewcomerPoll);
  }
  unready.insert(unready.end(), waiting.begin(), waiting.end());
  return unready;
}

void Orchestrator::take_in_newcomers(Attempt& a, HoldGuard& h, Classified& c, Toggled& t, std::set<pid_t>& held,
                                     std::map<pid_t, std::vector<Holder>> fresh, bool may_retry) {
  Phase ph = a.phase("newcomers");
  std::vector<pid_t> taken;
  for (int round = 0; !fresh.empty(); ++round) {
    Classified nc;
    nc.holders = std::move(fresh);
    const std::vector<pid_t> released = pids_of(nc.holders);
    if (holds_) holds_->hold(released);
    h.release(released);
    // Each runs alone until the driver reports it running, then is locked while it runs (a thread
    // of it may be inside a CUDA call that the lock waits for).
    std::vector<pid_t> unready = when_cuda_running(released, [&](pid_t pid) {
      try {
        toggler_->lock(pid, cfg_.lock_timeout_ms);
        t.record(pid, CudaState::Locked);
        nc.cuda.push_back(pid);
        nc.state[pid] = CudaState::Running;
        return true;
      } catch (const std::exception& e) {
        t.unsure(pid);
        log_.info("checkpoint " + a.req.container_id + ": newcomer pid " + std::to_string(pid) + ": lock failed: " + e.what());
        return false;
      }
    });
    std::vector<pid_t> outside = a.req.init_pid > 0 ? outside_init_tree(a.req.init_pid, nc.cuda) : std::vector<pid_t>{};
    unready.insert(unready.end(), outside.begin(), outside.end());
    std::vector<pid_t> before(held.begin(), held.end());
    for (pid_t p : released) held.erase(p);
    auto next = hold_still(a, h, t, held, before);  // the newcomers again, and their children
    bool refused = !nc.cuda.empty() && refusal(preflight(nc)).has_value();
    bool last_round = round == 3 && !next.empty();
    if ((!unready.empty() || refused || last_round) && may_retry) {
      Newcomers n;
      n.pids = unready.empty() ? nc.cuda : unready;
      throw n;
    }
    for (pid_t p : nc.cuda) {
      c.holders[p] = nc.holders.at(p);
      c.state[p] = CudaState::Running;
      c.cuda.push_back(p);
      taken.push_back(p);
    }
    if (!unready.empty() || refused || last_round) break;  // the last attempt: verify() names them
    fresh = std::move(next);
  }
  ph.done(taken.empty() ? "none taken in" : "pids " + comma_list(taken) + " locked");
}

void Orchestrator::checkpoint_all(Attempt& a, Classified& c, Toggled& t, bool may_retry) {
  Phase ckpt = a.phase("checkpoint");
  auto failed = toggle_all(c.cuda, cfg_.parallelism, [&](pid_t pid) {
    ensure_held(pid, "checkpoint");
    toggler_->checkpoint(pid);
    t.record(pid, CudaState::Checkpointed);
  });
  // Every failure is the answer of a process that is ending (a job runner's worker): locked, it
  // cannot finish its exit (measured under runsc: it ended only once the rollback let it go), so
  // the attempt is undone and made again, from a scan that no longer finds it.
  if (may_retry && !failed.empty() &&
      std::all_of(failed.begin(), failed.end(), [](const auto& f) { return answers_as_ending(f.second.driver_code()); })) {
    Newcomers n{.pids = pids_of(failed), .ending = true};
    ckpt.done("pids " + comma_list(n.pids) + " ending, made again");
    throw n;
  }
  auto ended = drop_ended(a, c, failed, "checkpoint");
  ckpt.done(count_processes(c.cuda.size()) + ", " + parallelism_text(cfg_.parallelism) +
            (ended.empty() ? "" : ", " + comma_list(ended) + " ended meanwhile"));
  if (!failed.empty())
    throw t.rollback(failure_rows(c, failed), Code::FailedPrecondition, "failed",
                     "CUDA checkpoint failed in " + count_processes(failed.size()));
}

// Newcomers where nothing holds the container (a sandbox): each taken in while the rest runs on.
// A round is short (one lock and checkpoint each), so a job runner's next worker rarely lands in it;
// the verify after it decides.
constexpr int kUnheldRounds = 4;

bool Orchestrator::take_in_unheld(Attempt& a, Classified& c, Toggled& t, const std::map<pid_t, std::vector<Holder>>& fresh) {
  Phase ph = a.phase("newcomers");
  std::vector<pid_t> taken, ending;
  bool ok = true;
  // One that never became a CUDA process, or ended meanwhile, is for the next verify to judge.
  when_cuda_running(pids_of(fresh), [&](pid_t pid) {
    c.holders[pid] = fresh.at(pid);
    try {
      toggler_->lock(pid, cfg_.lock_timeout_ms);
      t.record(pid, CudaState::Locked);
      toggler_->checkpoint(pid);
      t.record(pid, CudaState::Checkpointed);
      c.state[pid] = CudaState::Running;
      c.cuda.push_back(pid);
      taken.push_back(pid);
    } catch (const CudaError& e) {
      t.unsure(pid);
      log_.info("checkpoint " + a.req.container_id + ": newcomer pid " + std::to_string(pid) + ": " + e.what());
      if (answers_as_ending(e.driver_code()))
        ending.push_back(pid);  // a job's worker on its way out, its CUDA torn down: gone soon
      else
        ok = false;
    } catch (const std::exception& e) {
      t.unsure(pid);
      log_.info("checkpoint " + a.req.container_id + ": newcomer pid " + std::to_string(pid) + ": " + e.what());
      ok = false;
    }
    return true;
  });
  // A newcomer that ended is nothing to take in: the next round's scan no longer finds it.
  auto gone = ended_among(ending, kEndingGrace);
  for (pid_t pid : ending)
    if (!gone.contains(pid)) ok = false;
  ph.done((taken.empty() ? std::string("none taken in") : "pids " + comma_list(taken) + " locked and checkpointed") +
          (gone.empty() ? "" : ", " + comma_list(pids_of(gone)) + " ended meanwhile"));
  return ok && (!taken.empty() || !gone.empty());
}

std::map<pid_t, std::vector<Holder>> Orchestrator::untoggled_newcomers(const Classified& c, Toggled& t,
                                                                       std::map<pid_t, std::vector<Holder>>* all) {
  auto left = by_pid(scanner_.scan(lister_.list()));
  std::map<pid_t, std::vector<Holder>> fresh;
  for (const auto& [pid, hs] : left)
    if (!t.toggled(pid) && !c.holders.count(pid)) fresh[pid] = hs;
  if (all) *all = std::move(left);
  return fresh;
}

void Orchestrator::verify(Attempt& a, const std::vector<pid_t>& pids, Classified& c, Toggled& t, bool may_retry) {
  std::map<pid_t, std::vector<Holder>> left;
  for (int round = 0;; ++round) {
    auto fresh = untoggled_newcomers(c, t, &left);  // a process started meanwhile counts too
    if (hold_ || fresh.empty() || round == kUnheldRounds) break;
    if (!take_in_unheld(a, c, t, fresh)) {
      if (!may_retry) break;
      throw Newcomers{.pids = pids_of(fresh)};
    }
  }
  Phase verify = a.phase("verify");
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

void Orchestrator::take_snapshot(Attempt& a, const ReleasingSnapshotFn& snapshot, const Classified& c, HoldGuard& h, Toggled& t,
                                 bool may_retry) {
  const ReleasePlan& plan = c.release;
  Phase snap = a.phase("snapshot");
  if (h.on()) try {
      h.hand_to_runtime();
    } catch (const std::exception& e) {
      snap.done("failed");
      throw t.rollback({}, Code::FailedPrecondition, "failed",
                       std::string("the container could not be frozen for the runtime's snapshot: ") + e.what(), true);
    }
  // Whatever the snapshot did, the processes are held again before anything of them runs: a
  // rollback or the resume lets the driver in, and nothing else.
  auto take_back = [&] {
    if (!h.on()) return;
    try {
      h.take_back(lister_.list());
    } catch (const std::exception& e) {
      a.out.warnings.push_back(std::string("the container could not be held again after the snapshot (it runs until "
                                           "CUDA is back): ") +
                               e.what());
      log_.error("checkpoint " + a.req.container_id + ": " + a.out.warnings.back());
    }
  };
  try {
    snapshot(plan);
    if (a.req.keep_running)
      take_back();
    else if (h.on())
      h.container_ended();
  } catch (const Error& e) {
    take_back();
    if (e.code() == Code::DeadlineExceeded) {
      snap.done("out of time");
      SnapshotDeadline d = snapshot_deadline(e);
      a.deadline = d.json;
      throw t.rollback({}, Code::DeadlineExceeded, "failed", d.reason, true);
    }
    snap.done("failed");
    // Without a hold a CUDA process can start between the verify and the runtime's own pause (a
    // job runner's next worker under runsc: "Can't save pma ... nvproxy.frontendFDMemmapFile"):
    // that is a newcomer, and the attempt is made again.
    if (!h.on() && may_retry)
      if (auto fresh = untoggled_newcomers(c, t); !fresh.empty()) {
        std::string what = e.what();
        log_.info("checkpoint " + a.req.container_id + ": the runtime's checkpoint failed (" + what.substr(0, what.find('\n')) +
                  ") with CUDA processes started after the verify");
        throw Newcomers{.pids = pids_of(fresh)};
      }
    throw t.rollback({}, e.code(), "failed", std::string("the runtime's checkpoint failed: ") + e.what());
  } catch (const std::exception& e) {
    take_back();
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
