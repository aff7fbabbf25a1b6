#include "checkpoint/orchestrator.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <mutex>
#include <optional>
#include <set>

#include "checkpoint/gpu_facts.h"
#include "checkpoint/hints.h"
#include "checkpoint/parallel.h"
#include "checkpoint/restore_preflight.h"
#include "common/fs.h"
#include "common/process.h"

namespace nvproxy::checkpoint {

namespace fs = std::filesystem;

struct Orchestrator::Classified {
  std::map<pid_t, std::vector<Holder>> holders;
  std::map<pid_t, CudaState> state;          // holders whose state the driver reports
  std::map<pid_t, std::string> state_error;  // the others: what GetState answered
  std::vector<pid_t> cuda;                   // running CUDA holders: the ones to toggle
  std::vector<ProcessReport> blockers;       // holders the toggle cannot release, with hints
  std::string driver_error;                  // the CUDA driver cannot be asked at all: every holder is a blocker
};

namespace {

using Clock = std::chrono::steady_clock;

std::string fmt_ms(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", ms);
  return buf;
}

std::string pid_list(const std::vector<pid_t>& pids) {
  std::string s;
  for (pid_t p : pids) s += (s.empty() ? "" : ",") + std::to_string(p);
  return s;
}

// Times one phase: recorded in `phases` and logged when it ends.
class Phase {
 public:
  Phase(std::vector<PhaseTiming>& phases, Logger& log, std::string id, std::string name)
      : phases_(phases), log_(log), id_(std::move(id)), name_(std::move(name)), start_(Clock::now()) {}
  void done(const std::string& detail = "") {
    if (ended_) return;
    ended_ = true;
    double ms = std::chrono::duration<double, std::milli>(Clock::now() - start_).count();
    phases_.push_back({name_, ms});
    log_.info("checkpoint " + id_ + ": " + name_ + " " + fmt_ms(ms) + " ms" + (detail.empty() ? "" : " (" + detail + ")"));
  }
  ~Phase() { done(); }

 private:
  std::vector<PhaseTiming>& phases_;
  Logger& log_;
  std::string id_, name_;
  Clock::time_point start_;
  bool ended_ = false;
};

std::string parallelism_text(unsigned parallelism) {
  return parallelism == 0 ? "all at once" : std::to_string(parallelism) + " at a time";
}

// A snapshot that ran out of time: what the error and the diagnostic say about it.
struct SnapshotDeadline {
  std::string reason;  // "snapshot (runc checkpoint) did not finish within N ms; killed ...; container thawed"
  nlohmann::json json;
};

SnapshotDeadline snapshot_deadline(const Error& e) {
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

std::map<pid_t, std::vector<Holder>> by_pid(const std::vector<Holder>& hs) {
  std::map<pid_t, std::vector<Holder>> m;
  for (const auto& h : hs) m[h.pid].push_back(h);
  return m;
}

// One toggle per pid on worker threads; collects the CudaErrors. Anything else (the API cannot be
// reached) is rethrown after every worker has finished.
std::map<pid_t, CudaError> toggle_all(const std::vector<pid_t>& pids, unsigned parallelism,
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

}  // namespace

ProcessReport Orchestrator::report_for(pid_t pid, const std::vector<Holder>& holders) {
  ProcessReport r{.pid = pid, .holders = holders};
  if (!holders.empty()) {
    r.name = holders.front().name;
    r.cmdline = holders.front().cmdline;
  } else if (auto pi = scanner_.info(pid)) {
    r.name = pi->name;
    r.cmdline = pi->cmdline;
  }
  return r;
}

Orchestrator::Classified Orchestrator::classify(const std::string& id, const std::vector<Holder>& holders) {
  Classified c;
  c.holders = by_pid(holders);
  std::vector<pid_t> pids;
  for (const auto& [pid, _] : c.holders) pids.push_back(pid);
  std::mutex mu;
  try {
    auto errors = toggle_all(pids, cfg_.parallelism, [&](pid_t pid) {
      CudaState s = toggler_->get_state(pid);
      std::lock_guard lk(mu);
      c.state[pid] = s;
    });
    for (const auto& [pid, e] : errors) c.state_error[pid] = e.answer();
  } catch (const Error& e) {
    // No driver (no libcuda on this host, the helper cannot start): nothing can be toggled, and
    // every holder is named with its devices, as any other refusal.
    c.driver_error = e.what();
    c.state.clear();
    for (pid_t pid : pids) {
      ProcessReport r = report_for(pid, c.holders[pid]);
      r.cuda_state = "(unknown)";
      std::string devs;
      for (const auto& [fds, dev] : group_by_device(r.holders)) devs += (devs.empty() ? "" : ", ") + dev + " (fd " + fds + ")";
      r.hint = "pid " + std::to_string(pid) + " (" + r.name + ") holds " + devs +
               ", but the CUDA driver cannot be asked about it here; make the driver loadable (checkpoint.libcuda) or stop "
               "the process before checkpointing";
      c.blockers.push_back(std::move(r));
    }
    log_.warn("checkpoint of container \"" + id + "\": CUDA state of " + pid_list(pids) + " cannot be read: " + e.what());
    return c;
  }
  for (pid_t pid : pids) {
    const auto& hs = c.holders[pid];
    auto st = c.state.find(pid);
    if (st != c.state.end() && st->second == CudaState::Running) {
      c.cuda.push_back(pid);
      continue;
    }
    ProcessReport r = report_for(pid, hs);
    if (st != c.state.end()) {
      r.cuda_state = state_name(st->second);
      r.hint = hint_wrong_state(pid, st->second);
    } else {
      r.cuda_state = "(no CUDA)";
      ProcInfo self = scanner_.info(pid).value_or(ProcInfo{.pid = pid, .name = r.name, .cmdline = r.cmdline});
      std::optional<ProcInfo> parent;
      if (self.ppid > 0 && c.state.count(self.ppid)) parent = scanner_.info(self.ppid);
      r.hint = hint_not_cuda(self, parent ? &*parent : nullptr, hs.front().path, c.state_error[pid]);
    }
    c.blockers.push_back(std::move(r));
  }
  return c;
}

std::vector<ProcessReport> Orchestrator::collective_ranks(const Classified& c,
                                                          const std::map<pid_t, std::set<std::string>>& gpus) {
  std::vector<ProcessReport> ranks;
  auto found = comm_->scan(c.cuda);
  for (pid_t pid : c.cuda) {
    auto f = found.find(pid);
    if (f == found.end()) continue;
    // A TCP link between two CUDA processes counts only across GPUs (NCCL ranks never share one).
    bool across = false;
    auto mine = gpus.find(pid);
    for (pid_t q : f->second.tcp_peers) {
      auto theirs = gpus.find(q);
      if (mine != gpus.end() && theirs != gpus.end() && mine->second != theirs->second) across = true;
    }
    if (!f->second.nccl && !across) continue;
    auto h = c.holders.find(pid);
    ProcessReport r = report_for(pid, h == c.holders.end() ? std::vector<Holder>{} : h->second);
    r.cuda_state = "running";
    if (mine != gpus.end()) r.gpus.assign(mine->second.begin(), mine->second.end());
    r.hint = hint_collective(pid, f->second.evidence);
    ranks.push_back(std::move(r));
  }
  return ranks;
}

std::vector<pid_t> Orchestrator::outside_init_tree(pid_t init, const std::vector<pid_t>& pids) {
  if (init <= 0) return {};
  std::map<pid_t, pid_t> parent;
  for (pid_t p : pids)
    if (auto pi = scanner_.info(p)) parent[p] = pi->ppid;
  // In the tree: init, or a child of a process in the tree. A process gone meanwhile counts as in it.
  std::map<pid_t, bool> memo{{init, true}};
  std::function<bool(pid_t, int)> in_tree = [&](pid_t p, int depth) {
    if (auto m = memo.find(p); m != memo.end()) return m->second;
    auto pp = parent.find(p);
    bool in = pp == parent.end() || (depth < 4096 && parent.count(pp->second) && in_tree(pp->second, depth + 1));
    if (pp != parent.end() && pp->second == init) in = true;
    memo[p] = in;
    return in;
  };
  std::vector<pid_t> out;
  for (pid_t p : pids)
    if (!in_tree(p, 0)) out.push_back(p);
  std::sort(out.begin(), out.end());
  return out;
}

std::map<pid_t, std::set<std::string>> Orchestrator::probe_gpus(std::string& error) {
  try {
    return probe_->gpus_by_pid();
  } catch (const Error& e) {
    error = e.what();
    return {};
  }
}

std::optional<StuckProcess> Orchestrator::bring_back_once(pid_t pid, const std::map<pid_t, CudaState>& believed,
                                                          const DeviceMap& map) {
  std::optional<CudaState> s;
  std::string why;
  try {
    s = toggler_->get_state(pid);
  } catch (const std::exception& e) {
    why = std::string("GetState: ") + e.what();
    if (auto b = believed.find(pid); b != believed.end()) s = b->second;
  }
  if (!s) return StuckProcess{pid, "unknown", why};
  try {
    if (*s == CudaState::Checkpointed) {
      try {
        toggler_->restore_onto(pid, map);
        s = CudaState::Locked;
      } catch (const CudaError& e) {
        // Unlock needs a restored process (it answers ILLEGAL_STATE): not tried.
        return StuckProcess{pid, "checkpointed", "restore answered " + e.answer()};
      }
    }
    if (*s == CudaState::Locked) {
      try {
        toggler_->unlock(pid);
        s = CudaState::Running;
      } catch (const CudaError& e) {
        return StuckProcess{pid, "locked", "unlock answered " + e.answer()};
      }
    }
    if (*s == CudaState::Failed) return StuckProcess{pid, "failed", "the driver reports CUDA state failed"};
  } catch (const std::exception& e) {  // the API itself is gone (e.g. the CUDA helper died)
    return StuckProcess{pid, std::string(state_name(*s)), e.what()};
  }
  return std::nullopt;
}

Orchestrator::Resumed Orchestrator::bring_back(const std::vector<pid_t>& pids, const std::map<pid_t, CudaState>& believed,
                                               const DeviceMap& map) {
  Resumed out;
  std::mutex mu;
  for_each_parallel(pids, cfg_.parallelism, [&](pid_t pid) {
    std::optional<StuckProcess> stuck = bring_back_once(pid, believed, map);
    if (stuck && stuck->state != "failed") {
      // One more time from whatever state it is in now: a one-shot driver error, or a CUDA helper
      // that died (the next call starts a fresh one), must not strand a process that asking again
      // brings back. A second refusal is the answer.
      log_.warn("CUDA process " + std::to_string(pid) + " did not come back (" + stuck->state + ": " + stuck->detail +
                "); asking once more");
      stuck = bring_back_once(pid, believed, map);
    }
    std::lock_guard lk(mu);
    if (stuck)
      out.stuck.push_back(*stuck);
    else
      out.running.push_back(pid);
  });
  std::sort(out.running.begin(), out.running.end());
  std::sort(out.stuck.begin(), out.stuck.end(), [](const auto& a, const auto& b) { return a.pid < b.pid; });
  return out;
}

CheckpointOutcome Orchestrator::checkpoint(const CheckpointRequest& req, const SnapshotFn& snapshot) {
  const std::string& id = req.container_id;
  CheckpointOutcome out;
  Diagnostic diag{.container = id};
  std::error_code ec;
  if (!req.diagnostic_path.empty()) fs::remove(req.diagnostic_path, ec);  // a stale one would mislead

  // Set when the snapshot ran out of time: the diagnostic's "deadline" (phase, command, timeout).
  std::optional<nlohmann::json> deadline;
  // Every refusal and failure ends here: write the JSON, throw the text.
  auto fail = [&](Code code, std::string verdict, std::string reason) -> Error {
    diag.verdict = std::move(verdict);
    diag.reason = std::move(reason);
    diag.phases = out.phases;
    diag.warnings.insert(diag.warnings.end(), out.warnings.begin(), out.warnings.end());
    std::string text = render_text(diag);
    if (!req.diagnostic_path.empty()) {
      try {
        if (deadline) {
          nlohmann::json j = to_json(diag);
          j["deadline"] = *deadline;
          write_file_atomic(req.diagnostic_path, j.dump(2) + "\n");
        } else {
          write_json(diag, req.diagnostic_path);
        }
      } catch (const std::exception& e) {
        log_.warn("checkpoint " + id + ": cannot write the diagnostic: " + e.what());
      }
    }
    log_.warn(text);
    while (!text.empty() && text.back() == '\n') text.pop_back();
    return Error(code, text);
  };

  // The snapshot alone (nothing toggled): its errors pass through, but a deadline is written down.
  auto snapshot_only = [&] {
    Phase ph(out.phases, log_, id, "snapshot");
    try {
      snapshot();
    } catch (const Error& e) {
      if (e.code() != Code::DeadlineExceeded) throw;
      ph.done("out of time");
      SnapshotDeadline d = snapshot_deadline(e);
      deadline = d.json;
      throw fail(Code::DeadlineExceeded, "failed", d.reason + "; no CUDA process was toggled");
    }
  };

  // Can the runtime's snapshot work here at all? Asked before anything is toggled.
  auto refuse_unsnapshottable = [&](const std::vector<pid_t>& pids) {
    if (!snapshot_check_) return;
    Phase ph(out.phases, log_, id, "runtime");
    std::optional<SnapshotProblem> p = snapshot_check_->check(pids);
    ph.done(p ? "refused" : "ok");
    if (!p) return;
    if (!p->key.empty()) diag.details[p->key] = p->details;
    for (const auto& [pid, hint] : p->hints) {
      ProcessReport r = report_for(pid, {});
      r.cuda_state = "(not toggled)";
      r.hint = hint;
      diag.processes.push_back(std::move(r));
    }
    throw fail(Code::FailedPrecondition, "refused", p->reason);
  };

  if (!toggler_) {
    log_.info("checkpoint " + id + ": CUDA toggling is off (checkpoint.cuda: none)");
    if (snapshot_check_) refuse_unsnapshottable(lister_.list());
    snapshot_only();
    write_done(req, diag, out);
    return out;
  }

  Phase scan(out.phases, log_, id, "scan");
  std::vector<pid_t> pids = lister_.list();
  std::vector<Holder> holders = scanner_.scan(pids);
  scan.done(count_processes(pids.size()) + ", " + std::to_string(holders.size()) + " device holders");
  refuse_unsnapshottable(pids);
  if (holders.empty()) {
    snapshot_only();
    write_done(req, diag, out);
    return out;
  }

  Phase cls(out.phases, log_, id, "classify");
  Classified c = classify(id, holders);
  cls.done("CUDA pids " + pid_list(c.cuda));
  if (!c.driver_error.empty()) {
    diag.processes = c.blockers;
    throw fail(Code::FailedPrecondition, "refused",
               count_processes(c.blockers.size()) + (c.blockers.size() == 1 ? " holds" : " hold") +
                   " GPU devices, but their CUDA state cannot be read: " + c.driver_error);
  }
  if (!c.blockers.empty()) {
    diag.processes = c.blockers;
    throw fail(Code::FailedPrecondition, "refused",
               count_processes(c.blockers.size()) + (c.blockers.size() == 1 ? " holds" : " hold") +
                   " GPU devices that the CUDA toggle cannot release");
  }

  {
    Phase pre(out.phases, log_, id, "preflight");
    Preflight pf = preflight(c);
    if (auto r = refusal(pf)) {
      diag.processes = r->processes;
      if (diag.processes.empty()) {  // the GPU probe failed: the table names the processes it concerns
        for (pid_t p : c.cuda) {
          ProcessReport rep = report_for(p, c.holders[p]);
          rep.cuda_state = "running";
          diag.processes.push_back(std::move(rep));
        }
      }
      throw fail(Code::FailedPrecondition, "refused", r->reason);
    }
    for (auto& w : preflight_warnings(pf)) out.warnings.push_back(std::move(w));
    for (const auto& w : out.warnings) log_.warn("checkpoint " + id + ": " + w);
  }

  // What a restore will not bring back: processes outside the init's tree (exec'd ones).
  std::vector<pid_t> outside = outside_init_tree(req.init_pid, pids);
  if (!outside.empty()) {
    nlohmann::json lost = nlohmann::json::array();
    std::vector<ProcessReport> lost_cuda;
    std::string names;
    for (pid_t p : outside) {
      auto h = c.holders.find(p);
      ProcessReport r = report_for(p, h == c.holders.end() ? std::vector<Holder>{} : h->second);
      bool cuda = std::find(c.cuda.begin(), c.cuda.end(), p) != c.cuda.end();
      lost.push_back({{"pid", p}, {"name", r.name}, {"cmdline", r.cmdline}, {"cuda", cuda}});
      names += (names.empty() ? "" : ", ") + std::to_string(p) + " (" + r.name + (cuda ? ", CUDA" : "") + ")";
      if (!cuda) continue;
      r.cuda_state = "running";
      r.hint = "pid " + std::to_string(p) + " (" + r.name +
               ") runs beside the init, outside its process tree (started by exec?): a restore brings back the init's "
               "tree only, so this CUDA process and its GPU state would be lost; stop it before checkpointing, or set "
               "checkpoint.allow_lost_cuda_processes";
      lost_cuda.push_back(std::move(r));
      out.lost.push_back(p);
    }
    diag.details["not_restored"] = lost;
    if (!lost_cuda.empty() && !cfg_.allow_lost_cuda_processes) {
      diag.processes = lost_cuda;
      throw fail(Code::FailedPrecondition, "refused",
                 count_processes(lost_cuda.size()) + " with CUDA state " + (lost_cuda.size() == 1 ? "is" : "are") +
                     " outside the init's process tree, and a restore would not bring " +
                     (lost_cuda.size() == 1 ? "it" : "them") + " back");
    }
    out.warnings.push_back("processes outside the init's process tree (a restore will not bring them back): " + names +
                           (lost_cuda.empty() ? "" : "; checkpointing anyway (checkpoint.allow_lost_cuda_processes)"));
    log_.warn("checkpoint " + id + ": " + out.warnings.back());
  }

  // Does the image fit? Asked before any toggle, with the numbers.
  if (space_ && cfg_.check_space && !req.image_path.empty() && !c.cuda.empty()) {
    Phase sp(out.phases, log_, id, "space");
    SpaceNeed need;
    std::vector<ProcessReport> rows;
    for (pid_t p : pids) {
      std::uint64_t mem = space_->process_bytes(p);
      need.process_bytes += mem;
      if (std::find(c.cuda.begin(), c.cuda.end(), p) == c.cuda.end()) continue;
      ProcessReport r = report_for(p, c.holders[p]);
      r.cuda_state = "running";
      auto d = req.device_bytes.find(p);
      if (d == req.device_bytes.end())
        need.device_unknown.push_back(p);
      else
        need.device_bytes += d->second;
      r.hint = "pid " + std::to_string(p) + " (" + r.name + "): device memory " +
               (d == req.device_bytes.end() ? std::string("unknown") : format_bytes(d->second)) + ", process memory " +
               format_bytes(mem);
      rows.push_back(std::move(r));
    }
    SpaceVerdict v;
    try {
      v = check_space(need, req.image_path, req.content_store, *space_);
    } catch (const Error& e) {
      v.json = {{"error", e.what()}};
      out.warnings.push_back(std::string("cannot tell whether the checkpoint fits: ") + e.what());
    }
    diag.details["space"] = v.json;
    sp.done(v.fits ? "fits" : "does not fit");
    if (!v.fits) {
      diag.processes = rows;
      throw fail(Code::FailedPrecondition, "refused", v.reason);
    }
  }

  // From here on, every way out restores what was toggled. `believed` is the state we put each
  // pid in; the driver is asked again when rolling back.
  std::map<pid_t, CudaState> believed;
  std::mutex mu;
  // summarize: the reason ends with what the rollback did ("CUDA restored in pids 4,5").
  auto rollback = [&](std::vector<ProcessReport> processes, Code code, std::string verdict, std::string reason,
                      bool summarize = false) {
    std::vector<pid_t> toggled;
    for (const auto& [pid, _] : believed) toggled.push_back(pid);
    Phase rb(out.phases, log_, id, "rollback");
    Resumed r = bring_back(toggled, believed);
    rb.done("restored " + pid_list(r.running) + (r.stuck.empty() ? "" : ", STUCK " + std::to_string(r.stuck.size())));
    if (summarize) {
      if (!r.running.empty()) reason += "; CUDA restored in pids " + pid_list(r.running);
      if (!r.stuck.empty()) {
        std::vector<pid_t> stuck;
        for (const auto& p : r.stuck) stuck.push_back(p.pid);
        reason += "; CUDA could NOT be restored in pids " + pid_list(stuck);
      }
    }
    diag.processes = std::move(processes);
    diag.rolled_back = r.running;
    diag.stuck = r.stuck;
    return fail(code, std::move(verdict), std::move(reason));
  };
  auto failures_report = [&](const std::map<pid_t, CudaError>& failed) {
    std::vector<ProcessReport> reps;
    for (const auto& [pid, e] : failed) {
      ProcessReport r = report_for(pid, c.holders[pid]);
      r.cuda_state = "(" + e.op() + " failed)";
      r.hint = hint_toggle_failed(e, cfg_.lock_timeout_ms);
      reps.push_back(std::move(r));
    }
    return reps;
  };
  auto record = [&](pid_t pid, CudaState s) {
    std::lock_guard lk(mu);
    believed[pid] = s;
  };

  try {
    Phase lock(out.phases, log_, id, "lock");
    auto lock_failed = toggle_all(c.cuda, 0, [&](pid_t pid) {
      // Locks are quick (measured 0.3 ms) and bounded by the timeout: always all at once, so every
      // process is quiesced before any is checkpointed.
      toggler_->lock(pid, cfg_.lock_timeout_ms);
      record(pid, CudaState::Locked);
    });
    lock.done(count_processes(c.cuda.size()));
    for (const auto& [pid, _] : lock_failed) believed.emplace(pid, CudaState::Running);  // asked again
    if (!lock_failed.empty())
      throw rollback(failures_report(lock_failed), Code::FailedPrecondition, "failed",
                     "CUDA lock failed in " + count_processes(lock_failed.size()));

    Phase ckpt(out.phases, log_, id, "checkpoint");
    auto ckpt_failed = toggle_all(c.cuda, cfg_.parallelism, [&](pid_t pid) {
      toggler_->checkpoint(pid);
      record(pid, CudaState::Checkpointed);
    });
    ckpt.done(count_processes(c.cuda.size()) + ", " + parallelism_text(cfg_.parallelism));
    if (!ckpt_failed.empty())
      throw rollback(failures_report(ckpt_failed), Code::FailedPrecondition, "failed",
                     "CUDA checkpoint failed in " + count_processes(ckpt_failed.size()));

    Phase verify(out.phases, log_, id, "verify");
    std::vector<pid_t> now = lister_.list();  // a process started meanwhile counts too
    auto left = by_pid(scanner_.scan(now));
    verify.done(std::to_string(left.size()) + " holders left");
    if (!left.empty()) {
      std::vector<ProcessReport> reps;
      for (const auto& [pid, hs] : left) {
        ProcessReport r = report_for(pid, hs);
        try {
          r.cuda_state = state_name(toggler_->get_state(pid));
        } catch (const std::exception&) {
          r.cuda_state = "(no CUDA)";
        }
        r.hint = hint_still_holds(pid, r.cuda_state, hs.front().path, believed.count(pid) > 0,
                                  std::binary_search(pids.begin(), pids.end(), pid));
        reps.push_back(std::move(r));
      }
      throw rollback(
          std::move(reps), Code::FailedPrecondition, "refused",
          count_processes(left.size()) + (left.size() == 1 ? " still holds" : " still hold") + " GPU devices after CUDA toggle");
    }

    Phase snap(out.phases, log_, id, "snapshot");
    try {
      snapshot();
    } catch (const Error& e) {
      if (e.code() == Code::DeadlineExceeded) {
        snap.done("out of time");
        SnapshotDeadline d = snapshot_deadline(e);
        deadline = d.json;
        throw rollback({}, Code::DeadlineExceeded, "failed", d.reason, true);
      }
      snap.done("failed");
      throw rollback({}, e.code(), "failed", std::string("the runtime's checkpoint failed: ") + e.what());
    } catch (const std::exception& e) {
      snap.done("failed");
      throw rollback({}, Code::Internal, "failed", std::string("the runtime's checkpoint failed: ") + e.what());
    }
  } catch (const Error& e) {
    // Refusals built by rollback()/fail() carry their diagnostic; anything else (the CUDA API gone,
    // a scan error) still must not leave processes toggled.
    if (diag.verdict.empty()) throw rollback({}, e.code(), "failed", e.what());
    throw;
  } catch (const std::exception& e) {
    throw rollback({}, Code::Internal, "failed", e.what());
  }
  out.toggled = c.cuda;
  std::sort(out.toggled.begin(), out.toggled.end());

  if (req.keep_running) {
    Phase res(out.phases, log_, id, "resume");
    Resumed r = bring_back(out.toggled, believed);
    res.done("resumed " + pid_list(r.running));
    if (!r.stuck.empty()) {
      diag.rolled_back = r.running;
      diag.stuck = r.stuck;
      throw fail(Code::Internal, "failed",
                 "the checkpoint was written, but CUDA could not be resumed in " + count_processes(r.stuck.size()));
    }
  }
  write_done(req, diag, out);
  return out;
}

void Orchestrator::write_done(const CheckpointRequest& req, Diagnostic& diag, const CheckpointOutcome& out) {
  if (req.diagnostic_path.empty()) return;
  diag.verdict = "done";
  diag.reason = count_processes(out.toggled.size()) + " with CUDA state checkpointed";
  diag.toggled = out.toggled;
  diag.phases = out.phases;
  diag.warnings.insert(diag.warnings.end(), out.warnings.begin(), out.warnings.end());
  try {
    write_json(diag, req.diagnostic_path);
  } catch (const std::exception& e) {
    log_.warn("checkpoint " + req.container_id + ": cannot write the report: " + e.what());
  }
}

ResumeOutcome Orchestrator::restore_after_runtime_restore(const std::string& id, const fs::path& diagnostic_path,
                                                          const std::vector<ExpectedProcess>& expected,
                                                          const DeviceMap& device_map) {
  ResumeOutcome out;
  if (!toggler_) return out;
  Phase scan(out.phases, log_, id, "scan");
  std::vector<pid_t> pids = lister_.list();  // new host pids after the runtime's restore
  std::map<pid_t, CudaState> states;
  std::mutex mu;
  try {
    toggle_all(pids, cfg_.parallelism, [&](pid_t pid) {
      CudaState s = toggler_->get_state(pid);
      std::lock_guard lk(mu);
      states[pid] = s;
    });  // a pid whose state cannot be read is not a CUDA process: nothing to do
  } catch (const Error& e) {
    throw Error(e.code(), "restore of container \"" + id + "\": cannot read the CUDA state of its processes " + pid_list(pids) +
                              ": " + e.what());
  }
  std::vector<pid_t> todo;
  for (const auto& [pid, s] : states)
    if (s == CudaState::Checkpointed || s == CudaState::Locked) todo.push_back(pid);
  scan.done(count_processes(pids.size()) + ", to restore: " + pid_list(todo));
  // Which recorded CUDA processes are not among them (pids in the container's namespace survive a
  // restore): missing, whatever became of them.
  std::vector<ExpectedProcess> missing;
  {
    std::set<pid_t> found;
    for (pid_t p : todo) found.insert(identify_process(p).pid);
    for (const auto& e : expected)
      if (!found.count(e.pid)) missing.push_back(e);
  }
  if (todo.empty() && missing.empty()) return out;

  Phase res(out.phases, log_, id, "resume");
  Resumed r = bring_back(todo, states, device_map);
  res.done("resumed " + pid_list(r.running));
  out.resumed = r.running;
  if (!r.stuck.empty() || !missing.empty()) {
    std::string reason;
    if (!r.stuck.empty()) reason = "CUDA could not be restored after the runtime's restore in " + count_processes(r.stuck.size());
    if (!missing.empty()) {
      std::string names;
      for (const auto& m : missing) names += (names.empty() ? "" : ", ") + std::to_string(m.pid) + " (" + m.name + ")";
      reason += std::string(reason.empty() ? "" : "; ") + "the checkpoint recorded " + count_processes(expected.size()) +
                " with CUDA state, " + std::to_string(missing.size()) + " of them " + (missing.size() == 1 ? "is" : "are") +
                " missing after the runtime's restore (container pids " + names + ")";
    }
    Diagnostic d{.container = id, .reason = reason, .phases = out.phases, .rolled_back = r.running, .stuck = r.stuck};
    nlohmann::json mj = nlohmann::json::array();
    for (const auto& m : missing) mj.push_back({{"pid", m.pid}, {"name", m.name}});
    d.details["missing"] = mj;
    for (const auto& s : r.stuck) {
      ProcessReport rep = report_for(s.pid, {});
      rep.cuda_state = s.state;
      d.processes.push_back(std::move(rep));
    }
    std::string text = render_text(d);
    if (!diagnostic_path.empty()) {
      try {
        write_json(d, diagnostic_path);
      } catch (const std::exception& e) {
        log_.warn("restore " + id + ": cannot write the diagnostic: " + e.what());
      }
    }
    log_.error(text);
    while (!text.empty() && text.back() == '\n') text.pop_back();
    throw Error(Code::FailedPrecondition, text);
  }
  return out;
}

Orchestrator::Preflight Orchestrator::preflight(const Classified& c) {
  Preflight pf;
  if (probe_) pf.gpus = probe_gpus(pf.probe_error);
  for (pid_t pid : c.cuda) {
    auto g = pf.gpus.find(pid);
    if (g == pf.gpus.end() || g->second.size() < 2) continue;
    ProcessReport r = report_for(pid, c.holders.at(pid));
    r.cuda_state = "running";
    r.gpus.assign(g->second.begin(), g->second.end());
    r.hint = hint_multi_gpu(pid, g->second);
    pf.multi_gpu.push_back(std::move(r));
  }
  if (comm_) pf.ranks = collective_ranks(c, pf.gpus);
  // CUDA IPC and managed memory, as the process's maps show them (holder_scan.h).
  for (pid_t pid : c.cuda) {
    auto pi = scanner_.info(pid);
    if (!pi) continue;
    auto row = [&] {
      ProcessReport r = report_for(pid, c.holders.at(pid));
      r.cuda_state = "running";
      if (auto g = pf.gpus.find(pid); g != pf.gpus.end()) r.gpus.assign(g->second.begin(), g->second.end());
      return r;
    };
    if (!pi->cuda_ipc_file.empty()) {
      ProcessReport r = row();
      r.hint = "pid " + std::to_string(pid) + " (" + r.name + ") maps " + pi->cuda_ipc_file +
               ": it shares GPU memory with another process through CUDA IPC (cudaIpc*, e.g. a CUDA tensor passed "
               "through torch.multiprocessing); the driver checkpoints such processes but cannot restore the importer "
               "(CUDA_ERROR_OPERATING_SYSTEM, measured), so keep GPU tensors out of the queues or stop the sharing first";
      pf.ipc.push_back(std::move(r));
    }
    if (pi->uvm_managed_bytes > 0) {
      ProcessReport r = row();
      r.hint = "pid " + std::to_string(pid) + " (" + r.name + ") holds " + format_bytes(pi->uvm_managed_bytes) +
               " of managed memory (cudaMallocManaged, mapped from /dev/nvidia-uvm); the driver does not checkpoint it "
               "(CUDA_ERROR_NOT_SUPPORTED, measured)";
      pf.managed.push_back(std::move(r));
    }
  }
  return pf;
}

std::optional<Orchestrator::Refusal> Orchestrator::refusal(const Preflight& pf) const {
  if (cfg_.allow_unrestorable) return std::nullopt;
  if (!pf.probe_error.empty())
    return Refusal{"cannot tell which GPUs the processes use (" + pf.probe_error +
                       "), so processes the driver cannot restore are not detected; set checkpoint.allow_unrestorable to "
                       "checkpoint anyway",
                   {}};
  if (!pf.multi_gpu.empty())
    return Refusal{count_processes(pf.multi_gpu.size()) + (pf.multi_gpu.size() == 1 ? " has" : " have") +
                       " CUDA contexts on several GPUs; the driver cannot restore such processes",
                   pf.multi_gpu};
  if (!pf.ranks.empty())
    return Refusal{count_processes(pf.ranks.size()) + (pf.ranks.size() == 1 ? " is a rank" : " are ranks") +
                       " of a collective (NCCL) across GPUs; the driver cannot restore such processes",
                   pf.ranks};
  if (!pf.ipc.empty())
    return Refusal{count_processes(pf.ipc.size()) + (pf.ipc.size() == 1 ? " shares" : " share") +
                       " GPU memory through CUDA IPC; the driver cannot restore such processes",
                   pf.ipc};
  if (!pf.managed.empty())
    return Refusal{count_processes(pf.managed.size()) + (pf.managed.size() == 1 ? " holds" : " hold") +
                       " managed memory (cudaMallocManaged); the driver cannot checkpoint it",
                   pf.managed};
  return std::nullopt;
}

std::vector<std::string> Orchestrator::preflight_warnings(const Preflight& pf) const {
  std::vector<std::string> w;
  if (!pf.probe_error.empty())
    w.push_back("cannot tell which GPUs the processes use (" + pf.probe_error +
                "), so processes the driver cannot restore are not detected");
  for (const auto& r : pf.multi_gpu)
    w.push_back(
        "pid " + std::to_string(r.pid) + " has CUDA contexts on " + std::to_string(r.gpus.size()) +
        " GPUs; checkpointing anyway (checkpoint.allow_unrestorable): the driver may fail to restore it and leave it stuck");
  for (const auto& r : pf.ranks)
    w.push_back("pid " + std::to_string(r.pid) +
                " looks like a rank of a collective (NCCL); checkpointing anyway (checkpoint.allow_unrestorable): the driver "
                "may fail to restore it and leave it stuck");
  for (const auto& r : pf.ipc)
    w.push_back("pid " + std::to_string(r.pid) +
                " shares GPU memory through CUDA IPC; checkpointing anyway (checkpoint.allow_unrestorable): the driver may "
                "fail to restore it and leave it stuck");
  for (const auto& r : pf.managed)
    w.push_back("pid " + std::to_string(r.pid) +
                " holds managed memory; checkpointing anyway (checkpoint.allow_unrestorable): the driver is expected to "
                "refuse its checkpoint, which is then rolled back");
  return w;
}

Inspection Orchestrator::inspect(const std::string& id) {
  Inspection ins;
  Diagnostic& d = ins.diagnostic;
  d.container = id;
  std::vector<pid_t> pids = lister_.list();
  std::vector<Holder> holders = scanner_.scan(pids);
  if (!toggler_) {
    for (const auto& [pid, hs] : by_pid(holders)) {
      ProcessReport r = report_for(pid, hs);
      r.cuda_state = "(not checked)";
      d.processes.push_back(std::move(r));
    }
    d.reason = count_processes(d.processes.size()) + (d.processes.size() == 1 ? " holds" : " hold") +
               " GPU devices; CUDA toggling is off (checkpoint.cuda: none)";
    return ins;
  }
  Classified c = classify(id, holders);
  Preflight pf = preflight(c);
  if (!pf.probe_error.empty()) d.warnings.push_back("cannot tell which GPUs the processes use: " + pf.probe_error);
  std::map<pid_t, ProcessReport> reps;
  for (const auto& b : c.blockers) reps[b.pid] = b;
  for (pid_t pid : c.cuda) {
    ProcessReport r = report_for(pid, c.holders[pid]);
    r.cuda_state = "running";
    if (auto g = pf.gpus.find(pid); g != pf.gpus.end()) r.gpus.assign(g->second.begin(), g->second.end());
    reps[pid] = std::move(r);
  }
  for (const auto& r : pf.multi_gpu) reps[r.pid].hint = r.hint;
  for (const auto& r : pf.ranks) reps[r.pid].hint = r.hint;
  for (const auto& r : pf.ipc) reps[r.pid].hint = r.hint;
  for (const auto& r : pf.managed) reps[r.pid].hint = r.hint;
  // CUDA processes without device holders (e.g. left checkpointed) matter too.
  std::mutex mu;
  std::vector<pid_t> rest;
  for (pid_t p : pids)
    if (!c.holders.count(p)) rest.push_back(p);
  toggle_all(rest, cfg_.parallelism, [&](pid_t pid) {
    CudaState s = toggler_->get_state(pid);
    ProcessReport r = report_for(pid, {});
    r.cuda_state = state_name(s);
    if (s != CudaState::Running) r.hint = "pid " + std::to_string(pid) + " is CUDA-" + r.cuda_state + " and holds no device";
    std::lock_guard lk(mu);
    reps[pid] = std::move(r);
  });
  for (auto& [_, r] : reps) d.processes.push_back(std::move(r));
  // The checkpoint's own policy decides: blockers first, then what the driver cannot restore.
  if (!c.driver_error.empty()) {
    ins.would_refuse = true;
    d.reason = "a checkpoint would be refused: " + count_processes(c.blockers.size()) +
               (c.blockers.size() == 1 ? " holds" : " hold") +
               " GPU devices, but their CUDA state cannot be read: " + c.driver_error;
  } else if (!c.blockers.empty()) {
    ins.would_refuse = true;
    d.reason = "a checkpoint would be refused: " + count_processes(c.blockers.size()) +
               (c.blockers.size() == 1 ? " holds" : " hold") + " GPU devices that the CUDA toggle cannot release";
  } else if (auto r = refusal(pf); r && pf.probe_error.empty()) {
    ins.would_refuse = true;
    d.reason = "a checkpoint would be refused: " + r->reason;
  } else {
    d.reason = count_processes(pids.size()) + ", " + std::to_string(c.cuda.size()) + " CUDA device holders to toggle";
  }
  return ins;
}

}  // namespace nvproxy::checkpoint
