#include "checkpoint/orchestrator.h"

#include "checkpoint/orchestrator_parts.h"

#include <signal.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "checkpoint/hints.h"
#include "checkpoint/restore_preflight.h"
#include "checkpoint/shared/gpu_facts.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/parallel.h"
#include "common/process.h"

namespace nvproxy::checkpoint {

namespace fs = std::filesystem;

namespace {

template <typename T>
T& required(T* tool, const char* what) {
  if (!tool) throw Error(Code::Internal, std::string("checkpoint orchestrator built without a ") + what);
  return *tool;
}

}  // namespace

Orchestrator::Orchestrator(CheckpointConfig cfg, const OrchestratorTools& t, Logger& log)
    : cfg_(std::move(cfg)),
      lister_(required(t.lister, "process lister")),
      scanner_(required(t.scanner, "holder scanner")),
      toggler_(t.toggler),
      probe_(t.probe),
      comm_(t.comm),
      space_(t.space),
      snapshot_check_(t.snapshot_check),
      holds_(t.holds),
      hold_(t.hold),
      hold_unavailable_(t.hold_unavailable),
      files_(t.files),
      release_unavailable_(t.release_unavailable),
      release_way_(t.release_way),
      memory_(t.memory),
      reservations_(t.reservations),
      can_(capabilities_of(t)),
      log_(log) {}

Orchestrator::Capabilities Orchestrator::capabilities_of(const OrchestratorTools& t) {
  return {.toggles_cuda = t.toggler != nullptr,
          .holds_still = t.toggler != nullptr && t.hold != nullptr,
          .guards_pids = t.holds != nullptr,
          .checks_snapshot = t.snapshot_check != nullptr,
          .bills_staging = t.memory != nullptr,
          .probes_gpus = t.probe != nullptr,
          .probes_collectives = t.comm != nullptr,
          .identifies_files = t.files != nullptr,
          .checks_space = t.space != nullptr};
}
using namespace detail;

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
    log_.warn("checkpoint of container \"" + id + "\": CUDA state of " + comma_list(pids) + " cannot be read: " + e.what());
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
      if (!explain_inherited(pid, self, c, r))
        r.hint = hint_not_cuda(self, parent ? &*parent : nullptr, hs.front().path, c.state_error[pid]);
      else if (try_release(r, c))
        continue;
    }
    c.blockers.push_back(std::move(r));
  }
  refuse_forked_cuda(c);
  return c;
}

bool Orchestrator::shares_open_file(pid_t pid, int fd, pid_t anc, const std::vector<Holder>& theirs) {
  return std::any_of(theirs.begin(), theirs.end(),
                     [&](const Holder& a) { return a.kind == HolderKind::Fd && files_->same_file(pid, fd, anc, a.fd); });
}

pid_t Orchestrator::cuda_ancestor(const ProcInfo& self, const Classified& c) {
  // Bounded: a loop in a stale process table must not hang the checkpoint.
  pid_t anc = self.ppid;
  for (int depth = 0; anc > 0 && depth < 64; ++depth) {
    auto st = c.state.find(anc);
    if (st != c.state.end() && st->second == CudaState::Running) return c.holders.count(anc) ? anc : 0;
    auto pi = scanner_.info(anc);
    anc = pi ? pi->ppid : 0;
  }
  return 0;
}

bool Orchestrator::try_release(ProcessReport& r, Classified& c) {
  if (r.inherited_from <= 0 || r.inherited_fds.empty() || !r.own_fds.empty()) return false;
  const std::string cannot = "; the shim releases a forked child's inherited device files itself, but not here: ";
  if (!cfg_.release_inherited) {
    r.hint += cannot + "checkpoint.release_inherited is off";
    return false;
  }
  if (!release_unavailable_.empty()) {
    r.hint += cannot + release_unavailable_;
    return false;
  }
  ReleasedProcess rp{.pid = r.pid, .from = r.inherited_from, .fds = r.inherited_fds};
  std::vector<std::uint64_t> devices;
  for (const auto& h : r.holders) {
    if (release_way_ == ReleaseWay::CriuPlugin && h.device == 0) {
      r.hint += cannot + h.path + " is no character device the plugin can name";
      return false;
    }
    if (h.kind == HolderKind::Mapping) ++rp.mappings;
    if (h.device != 0) devices.push_back(h.device);
    if (std::find(rp.paths.begin(), rp.paths.end(), h.path) == rp.paths.end()) rp.paths.push_back(h.path);
  }
  log_.info("checkpoint: pid " + std::to_string(r.pid) + " (" + r.name + ") holds only the GPU device files of CUDA process " +
            std::to_string(rp.from) + " (fd " + comma_list(rp.fds) + ", " + std::to_string(rp.mappings) +
            " device mappings), forked without a CUDA context of its own: released from the image");
  auto& all = c.release.devices;
  all.insert(all.end(), devices.begin(), devices.end());
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  c.release.processes.push_back(std::move(rp));
  return true;
}

void Orchestrator::refuse_forked_cuda(Classified& c) {
  // A CUDA process is never stopped to be asked: there the driver's own refusal names it.
  if (!files_ || files_->stops_processes()) return;
  std::vector<pid_t> keep;
  for (pid_t pid : c.cuda) {
    auto self = scanner_.info(pid);
    pid_t anc = self ? cuda_ancestor(*self, c) : 0;
    std::vector<int> shared;
    if (anc > 0) {
      for (const auto& h : c.holders.at(pid))
        if (h.kind == HolderKind::Fd && shares_open_file(pid, h.fd, anc, c.holders.at(anc))) shared.push_back(h.fd);
    }
    if (shared.empty()) {
      keep.push_back(pid);
      continue;
    }
    ProcessReport r = report_for(pid, c.holders.at(pid));
    r.cuda_state = "running";
    r.inherited_from = anc;
    r.inherited_fds = shared;
    r.hint = "pid " + std::to_string(pid) + " (" + r.name + ") was forked from CUDA process " + std::to_string(anc) +
             " and holds its GPU device files (fd " + comma_list(shared) +
             ") beside a CUDA context of its own: the driver cannot checkpoint CUDA in a forked child; create CUDA "
             "processes with 'spawn' or 'forkserver'";
    c.blockers.push_back(std::move(r));
  }
  c.cuda = std::move(keep);
}

bool Orchestrator::explain_inherited(pid_t pid, const ProcInfo& self, const Classified& c, ProcessReport& r) {
  if (!can_.identifies_files) return false;
  pid_t anc = cuda_ancestor(self, c);
  if (anc <= 0) return false;
  auto theirs = c.holders.find(anc);
  std::vector<int> inherited, own;
  std::size_t mappings = 0;
  for (const auto& h : c.holders.at(pid)) {
    if (h.kind == HolderKind::Mapping) {
      ++mappings;
      continue;
    }
    (shares_open_file(pid, h.fd, anc, theirs->second) ? inherited : own).push_back(h.fd);
  }
  if (inherited.empty() && own.empty()) return false;  // mappings alone: nothing to compare
  if (!inherited.empty()) r.inherited_from = anc;
  r.inherited_fds = inherited;
  r.own_fds = own;
  const std::string who = "pid " + std::to_string(pid) + " (" + r.name + ")";
  if (!own.empty()) {
    // A comparison that could not be made is named as such, not guessed to be the child's own file.
    if (std::string why = files_->unknown_because(pid, anc); !why.empty())
      r.hint = who + " holds GPU device files (fd " + comma_list(own) + ") without CUDA, and whether they are CUDA process " +
               std::to_string(anc) + "'s open files could not be told: " + why;
    else
      r.hint = who + " holds GPU device files that are none of its CUDA ancestor's open files (fd " + comma_list(own) +
               ": opened by itself, or kept after the parent closed its copy) without CUDA" +
               (inherited.empty() ? std::string()
                                  : ", besides the ones inherited from CUDA process " + std::to_string(anc) + " (fd " +
                                        comma_list(inherited) + ")");
    r.hint += "; stop it or exclude it before checkpointing";
    return true;
  }
  r.hint = who + " was forked from CUDA process " + std::to_string(anc) + " and holds its GPU device files (fd " +
           comma_list(inherited) + ": the same open files" +
           (mappings ? ", and " + std::to_string(mappings) + " device mappings" : std::string()) +
           ") without a CUDA context of its own; the parent's CUDA checkpoint cannot release a child's copies: start such "
           "workers with 'spawn' or 'forkserver' (DataLoader(multiprocessing_context=\"spawn\"), "
           "multiprocessing.set_start_method(\"spawn\")), or stop them before checkpointing";
  return true;
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
    // NCCL alone in its group (single-GPU torchrun): nothing to reconnect at the restore.
    if (!across && f->second.maybe_alone) {
      log_.info("pid " + std::to_string(pid) + " uses NCCL as the only rank of its group (" +
                (f->second.evidence.empty() ? std::string() : f->second.evidence.front()) +
                "; no other rank in sight): checkpointed as a plain CUDA process");
      continue;
    }
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

void Orchestrator::ensure_held(pid_t pid, const char* op) {
  if (!can_.guards_pids) return;
  if (std::string why = holds_->gone(pid); !why.empty()) throw CudaError(pid, op, -1, "not asked", why);
}

std::optional<StuckProcess> Orchestrator::bring_back_once(pid_t pid, const std::map<pid_t, CudaState>& believed,
                                                          const DeviceMap& map) {
  if (can_.guards_pids)
    if (std::string why = holds_->gone(pid); !why.empty()) return StuckProcess{pid, "gone", why};
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
        toggler_->restore(pid, map);
        s = CudaState::Locked;
      } catch (const CudaError& e) {
        // Unlock needs a restored process (it answers ILLEGAL_STATE): not tried.
        return StuckProcess{pid, "checkpointed", "restore answered " + e.answer(), e.driver_code()};
      }
    }
    if (*s == CudaState::Locked) {
      try {
        toggler_->unlock(pid);
        s = CudaState::Running;
      } catch (const CudaError& e) {
        return StuckProcess{pid, "locked", "unlock answered " + e.answer(), e.driver_code()};
      }
    }
    if (*s == CudaState::Failed) return StuckProcess{pid, "failed", "the driver reports CUDA state failed"};
  } catch (const std::exception& e) {  // the API itself is gone (e.g. the CUDA helper died)
    return StuckProcess{pid, std::string(state_name(*s)), e.what()};
  }
  return std::nullopt;
}

std::map<pid_t, std::string> Orchestrator::ended_among(const std::vector<pid_t>& pids, std::chrono::milliseconds grace) {
  std::map<pid_t, std::string> gone;
  if (pids.empty()) return gone;
  auto deadline = Clock::now() + grace;
  for (;;) {
    if (can_.guards_pids) {
      for (pid_t p : pids)
        if (std::string why = holds_->gone(p); !why.empty()) gone[p] = why;
    } else {
      std::vector<pid_t> now;
      try {
        now = lister_.list();
      } catch (const std::exception& e) {
        // The sandbox cannot be asked (gone with its processes, say): nothing more can be told.
        log_.warn("the container's processes cannot be listed (" + std::string(e.what()) + "): pids " + comma_list(pids) +
                  " not known to have ended");
        return gone;
      }
      std::sort(now.begin(), now.end());
      for (pid_t p : pids)
        if (!std::binary_search(now.begin(), now.end(), p)) gone[p] = "no longer among the container's processes";
    }
    if (gone.size() == pids.size() || Clock::now() >= deadline) return gone;
    std::this_thread::sleep_for(kEndingPoll);
  }
}

Orchestrator::Resumed Orchestrator::bring_back(const std::vector<pid_t>& pids, const std::map<pid_t, CudaState>& believed,
                                               const DeviceMap& map) {
  Resumed out;
  std::mutex mu;
  for_each_parallel(pids, cfg_.parallelism, [&](pid_t pid) {
    std::optional<StuckProcess> stuck = bring_back_once(pid, believed, map);
    if (stuck && stuck->state != "failed" && stuck->state != "gone") {
      // One more time from whatever state it is in now: a one-shot driver error, or a CUDA helper
      // that died (the next call starts a fresh one), must not strand a process that asking again
      // brings back. A second refusal is the answer.
      log_.warn("CUDA process " + std::to_string(pid) + " did not come back (" + stuck->state + ": " + stuck->detail +
                "); asking once more");
      stuck = bring_back_once(pid, believed, map);
    }
    std::lock_guard lk(mu);
    if (stuck && stuck->state == "gone") {
      // It ended (killed, or done before its toggle): nothing is left to bring back or to strand.
      log_.info("CUDA process " + std::to_string(pid) + " has ended (" + stuck->detail + "): nothing to bring back");
      out.ended.push_back(pid);
    } else if (stuck) {
      out.stuck.push_back(*stuck);
    } else {
      out.running.push_back(pid);
    }
  });
  if (!can_.guards_pids && !out.stuck.empty()) {
    // No hold says at once whether a process ended (a sandbox's pids): one gone from the container
    // is not stuck.
    std::vector<pid_t> stuck;
    for (const auto& s : out.stuck) stuck.push_back(s.pid);
    bool ending =
        std::any_of(out.stuck.begin(), out.stuck.end(), [](const StuckProcess& s) { return answers_as_ending(s.driver_code); });
    auto gone = ended_among(stuck, ending ? kEndingGrace : std::chrono::milliseconds(0));
    std::erase_if(out.stuck, [&](const StuckProcess& s) {
      auto g = gone.find(s.pid);
      if (g == gone.end()) return false;
      log_.info("CUDA process " + std::to_string(s.pid) + " has ended (" + g->second + "): nothing to bring back");
      out.ended.push_back(s.pid);
      return true;
    });
  }
  std::sort(out.running.begin(), out.running.end());
  std::sort(out.ended.begin(), out.ended.end());
  std::sort(out.stuck.begin(), out.stuck.end(), [](const auto& a, const auto& b) { return a.pid < b.pid; });
  return out;
}

namespace {

// A restored container left stopped: held still for the CUDA restore, then let go; every way out
// lets it go, and a process the hold could not take is continued rather than left stopped.
class RestoreHold {
 public:
  RestoreHold(ContainerHold* hold, std::vector<pid_t> pids, Logger& log, std::string id)
      : hold_(hold), pids_(std::move(pids)), log_(log), id_(std::move(id)) {}
  ~RestoreHold() {
    if (held_) try {
        hold_->release();
      } catch (const std::exception& e) {
        log_.error("restore " + id_ + ": could not let the held processes go: " + e.what());
      }
    for (pid_t p : pids_) ::kill(p, SIGCONT);  // a no-op for a running process
  }
  RestoreHold(const RestoreHold&) = delete;
  RestoreHold& operator=(const RestoreHold&) = delete;

  // False: not held (no hold, or it failed, logged); the processes are continued now.
  bool take(std::vector<PhaseTiming>& phases) {
    Phase ph(phases, log_, id_, "hold", "restore");
    if (hold_) try {
        std::vector<pid_t> ended = hold_->hold_stopped(pids_);
        held_ = true;
        ph.done(count_processes(pids_.size() - ended.size()) + " held still");
        return true;
      } catch (const std::exception& e) {
        log_.warn("restore " + id_ + ": the restored processes could not be held still for their CUDA restore (" + e.what() +
                  "); they run meanwhile");
      }
    for (pid_t p : pids_) ::kill(p, SIGCONT);
    ph.done("not held");
    return false;
  }

 private:
  ContainerHold* hold_;
  std::vector<pid_t> pids_;
  Logger& log_;
  std::string id_;
  bool held_ = false;
};

}  // namespace

ResumeOutcome Orchestrator::restore_after_runtime_restore(const std::string& id, const fs::path& diagnostic_path,
                                                          const std::vector<ExpectedProcess>& expected,
                                                          const DeviceMap& device_map,
                                                          const std::function<pid_t(pid_t)>& container_pid, bool left_stopped) {
  ResumeOutcome out;
  std::vector<pid_t> pids = lister_.list();  // new host pids after the runtime's restore
  std::optional<RestoreHold> held;
  if (left_stopped) {
    held.emplace(can_.holds_still ? hold_ : nullptr, pids, log_, id);
    held->take(out.phases);
  }
  if (!can_.toggles_cuda) return out;
  Phase scan(out.phases, log_, id, "scan", "restore");
  if (can_.guards_pids) holds_->hold(pids);
  std::map<pid_t, CudaState> states;
  std::mutex mu;
  try {
    toggle_all(pids, cfg_.parallelism, [&](pid_t pid) {
      CudaState s = toggler_->get_state(pid);
      std::lock_guard lk(mu);
      states[pid] = s;
    });  // a pid whose state cannot be read is not a CUDA process: nothing to do
  } catch (const Error& e) {
    throw Error(e.code(), "restore of container \"" + id + "\": cannot read the CUDA state of its processes " + comma_list(pids) +
                              ": " + e.what());
  }
  std::vector<pid_t> todo;
  for (const auto& [pid, s] : states)
    if (s == CudaState::Checkpointed || s == CudaState::Locked) todo.push_back(pid);
  scan.done(count_processes(pids.size()) + ", to restore: " + comma_list(todo));
  // Which recorded CUDA processes are not among them (pids in the container's namespace survive a
  // restore): missing, whatever became of them.
  std::vector<ExpectedProcess> missing;
  {
    std::set<pid_t> found;
    for (pid_t p : todo) found.insert(container_pid ? container_pid(p) : identify_process(p).pid);
    for (const auto& e : expected)
      if (!found.count(e.pid)) missing.push_back(e);
  }
  if (todo.empty() && missing.empty()) return out;

  Phase res(out.phases, log_, id, "resume", "restore");
  Resumed r = bring_back(todo, states, device_map);
  res.done("resumed " + comma_list(r.running));
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

}  // namespace nvproxy::checkpoint
