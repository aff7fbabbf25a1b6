#include "checkpoint/orchestrator.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <mutex>
#include <optional>
#include <set>

#include "checkpoint/hints.h"
#include "checkpoint/parallel.h"
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
    throw Error(Code::FailedPrecondition, "checkpoint of container \"" + id + "\": processes " + pid_list(pids) +
                                              " hold GPU devices, but their CUDA state cannot be read: " + e.what());
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

std::map<pid_t, std::set<std::string>> Orchestrator::probe_gpus(std::string& error) {
  try {
    return probe_->gpus_by_pid();
  } catch (const Error& e) {
    error = e.what();
    return {};
  }
}

std::optional<StuckProcess> Orchestrator::bring_back_once(pid_t pid, const std::map<pid_t, CudaState>& believed) {
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
        toggler_->restore(pid);
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

Orchestrator::Resumed Orchestrator::bring_back(const std::vector<pid_t>& pids, const std::map<pid_t, CudaState>& believed) {
  Resumed out;
  std::mutex mu;
  for_each_parallel(pids, cfg_.parallelism, [&](pid_t pid) {
    std::optional<StuckProcess> stuck = bring_back_once(pid, believed);
    if (stuck && stuck->state != "failed") {
      // One more time from whatever state it is in now: a one-shot driver error, or a CUDA helper
      // that died (the next call starts a fresh one), must not strand a process that asking again
      // brings back. A second refusal is the answer.
      log_.warn("CUDA process " + std::to_string(pid) + " did not come back (" + stuck->state + ": " + stuck->detail +
                "); asking once more");
      stuck = bring_back_once(pid, believed);
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

  if (!toggler_) {
    log_.info("checkpoint " + id + ": CUDA toggling is off (checkpoint.cuda: none)");
    snapshot_only();
    write_done(req, diag, out);
    return out;
  }

  Phase scan(out.phases, log_, id, "scan");
  std::vector<pid_t> pids = lister_.list();
  std::vector<Holder> holders = scanner_.scan(pids);
  scan.done(count_processes(pids.size()) + ", " + std::to_string(holders.size()) + " device holders");
  if (holders.empty()) {
    snapshot_only();
    write_done(req, diag, out);
    return out;
  }

  Phase cls(out.phases, log_, id, "classify");
  Classified c = classify(id, holders);
  cls.done("CUDA pids " + pid_list(c.cuda));
  if (!c.blockers.empty()) {
    diag.processes = c.blockers;
    throw fail(Code::FailedPrecondition, "refused",
               count_processes(c.blockers.size()) + (c.blockers.size() == 1 ? " holds" : " hold") +
                   " GPU devices that the CUDA toggle cannot release");
  }

  if (probe_ || comm_) {
    Phase pre(out.phases, log_, id, "preflight");
    Preflight pf = preflight(c);
    if (auto r = refusal(pf)) {
      diag.processes = r->processes;
      throw fail(Code::FailedPrecondition, "refused", r->reason);
    }
    for (auto& w : preflight_warnings(pf)) out.warnings.push_back(std::move(w));
    for (const auto& w : out.warnings) log_.warn("checkpoint " + id + ": " + w);
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

ResumeOutcome Orchestrator::restore_after_runtime_restore(const std::string& id, const fs::path& diagnostic_path) {
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
  if (todo.empty()) return out;

  Phase res(out.phases, log_, id, "resume");
  Resumed r = bring_back(todo, states);
  res.done("resumed " + pid_list(r.running));
  out.resumed = r.running;
  if (!r.stuck.empty()) {
    Diagnostic d{.container = id,
                 .reason = "CUDA could not be restored after the runtime's restore in " + count_processes(r.stuck.size()),
                 .phases = out.phases,
                 .rolled_back = r.running,
                 .stuck = r.stuck};
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
  if (!c.blockers.empty()) {
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
