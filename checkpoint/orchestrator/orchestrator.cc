#include "checkpoint/orchestrator/orchestrator.h"

#include "checkpoint/orchestrator/orchestrator_parts.h"

#include <signal.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "checkpoint/facts/gpu_facts.h"
#include "checkpoint/preflight/restore_preflight.h"
#include "checkpoint/report/hints.h"
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
