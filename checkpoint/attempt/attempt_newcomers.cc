// Orchestrator::Attempt: holding the container still, the processes that started meanwhile
// (newcomers), and the verify that no holder is left (attempt.h).
#include <algorithm>
#include <thread>

#include "checkpoint/attempt/attempt.h"
#include "checkpoint/report/hints.h"

namespace nvproxy::checkpoint {

using namespace detail;

// After the lock, every thread of the container stops (the driver's restore threads excepted, for
// its own calls): nothing can touch what the CUDA checkpoint takes away, and no process can end
// or start until the resume. A process started before its parent stopped is found by listing again.
// Returns the held processes that were not scanned and hold GPU devices (a job runner's new worker),
// with what they hold.
Orchestrator::Attempt::Holders Orchestrator::Attempt::hold_still(const std::vector<pid_t>& scanned) {
  if (!hold_.on()) return {};
  Phase ph = phase("hold");
  std::set<pid_t> ended;
  try {
    for (int round = 0; round < 8; ++round) {
      std::vector<pid_t> fresh;
      for (pid_t p : o_.lister_.list())
        if (!held_.count(p)) fresh.push_back(p);
      if (fresh.empty()) break;
      for (pid_t p : hold_.hold(fresh)) ended.insert(p);
      held_.insert(fresh.begin(), fresh.end());
    }
  } catch (const std::exception& e) {
    ph.done("failed");
    throw rollback({}, Code::FailedPrecondition, "failed",
                   std::string("the container could not be held still for its CUDA checkpoint: ") + e.what(), true);
  }
  for (pid_t p : ended) held_.erase(p);
  ph.done(count_processes(held_.size()) + " held still");
  std::vector<pid_t> fresh;
  for (pid_t p : held_)
    if (std::find(scanned.begin(), scanned.end(), p) == scanned.end()) fresh.push_back(p);
  if (fresh.empty()) return {};
  return by_pid(o_.scanner_.scan(fresh));
}

// Newcomers: processes that opened GPU devices after the scan, while the rest of the container
// was being locked. Each is let run alone (the rest stay held) until its CUDA init is done, locked
// as the others were, and held again; its own children are found by the next round. One that the
// scan's policy has to judge (no CUDA within kNewcomerInit, outside the init's tree, refused by
// the preflight), or a lock that fails, starts the attempt again from a scan that sees it; on the
// last attempt the verify phase refuses it as any other holder.
constexpr auto kNewcomerInit = std::chrono::milliseconds(1500);
constexpr auto kNewcomerPoll = std::chrono::milliseconds(20);

// Waits (kNewcomerInit at most) for each of `waiting` to be a running CUDA process and calls
// take(pid) for it; one the holds say ended is skipped. Returns those never running in time and
// those take() refused.
std::vector<pid_t> Orchestrator::Attempt::when_cuda_running(std::vector<pid_t> waiting, const std::function<bool(pid_t)>& take) {
  auto deadline = Clock::now() + kNewcomerInit;
  std::vector<pid_t> unready;
  while (!waiting.empty()) {
    std::vector<pid_t> still;
    for (pid_t pid : waiting) {
      if (o_.can_.guards_pids && !o_.holds_->gone(pid).empty()) continue;
      try {
        if (o_.toggler_->get_state(pid) != CudaState::Running) throw std::runtime_error("not running");
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

std::optional<Orchestrator::Again> Orchestrator::Attempt::take_in_newcomers(Holders fresh) {
  Phase ph = phase("newcomers");
  std::vector<pid_t> taken;
  for (int round = 0; !fresh.empty(); ++round) {
    Classified nc;
    nc.holders = std::move(fresh);
    const std::vector<pid_t> released = pids_of(nc.holders);
    if (o_.can_.guards_pids) o_.holds_->hold(released);
    hold_.release(released);
    // Each runs alone until the driver reports it running, then is locked while it runs (a thread
    // of it may be inside a CUDA call that the lock waits for).
    std::vector<pid_t> unready = when_cuda_running(released, [&](pid_t pid) {
      try {
        o_.toggler_->lock(pid, o_.cfg_.lock_timeout_ms);
        toggled_.record(pid, CudaState::Locked);
        nc.cuda.push_back(pid);
        nc.state[pid] = CudaState::Running;
        return true;
      } catch (const std::exception& e) {
        toggled_.unsure(pid);
        o_.log_.info("checkpoint " + id_ + ": newcomer pid " + std::to_string(pid) + ": lock failed: " + e.what());
        return false;
      }
    });
    std::vector<pid_t> outside = req_.init_pid > 0 ? o_.outside_init_tree(req_.init_pid, nc.cuda) : std::vector<pid_t>{};
    unready.insert(unready.end(), outside.begin(), outside.end());
    std::vector<pid_t> before(held_.begin(), held_.end());
    for (pid_t p : released) held_.erase(p);
    auto next = hold_still(before);  // the newcomers again, and their children
    bool refused = !nc.cuda.empty() && o_.refusal(o_.preflight(nc)).has_value();
    bool last_round = round == 3 && !next.empty();
    if ((!unready.empty() || refused || last_round) && may_retry_) return Again{.pids = unready.empty() ? nc.cuda : unready};
    for (pid_t p : nc.cuda) {
      c_->holders[p] = nc.holders.at(p);
      c_->state[p] = CudaState::Running;
      c_->cuda.push_back(p);
      taken.push_back(p);
    }
    if (!unready.empty() || refused || last_round) break;  // the last attempt: verify() names them
    fresh = std::move(next);
  }
  ph.done(taken.empty() ? "none taken in" : "pids " + comma_list(taken) + " locked");
  return std::nullopt;
}

// Newcomers where nothing holds the container (a sandbox): each taken in while the rest runs on.
// A round is short (one lock and checkpoint each), so a job runner's next worker rarely lands in it;
// the verify after it decides.
constexpr int kUnheldRounds = 4;

// False when one could not be locked and checkpointed as the others were.
bool Orchestrator::Attempt::take_in_unheld(const Holders& fresh) {
  Phase ph = phase("newcomers");
  std::vector<pid_t> taken, ending;
  bool ok = true;
  // One that never became a CUDA process, or ended meanwhile, is for the next verify to judge.
  when_cuda_running(pids_of(fresh), [&](pid_t pid) {
    c_->holders[pid] = fresh.at(pid);
    try {
      o_.toggler_->lock(pid, o_.cfg_.lock_timeout_ms);
      toggled_.record(pid, CudaState::Locked);
      o_.toggler_->checkpoint(pid);
      toggled_.record(pid, CudaState::Checkpointed);
      c_->state[pid] = CudaState::Running;
      c_->cuda.push_back(pid);
      taken.push_back(pid);
    } catch (const CudaError& e) {
      toggled_.unsure(pid);
      o_.log_.info("checkpoint " + id_ + ": newcomer pid " + std::to_string(pid) + ": " + e.what());
      if (answers_as_ending(e.driver_code()))
        ending.push_back(pid);  // a job's worker on its way out, its CUDA torn down: gone soon
      else
        ok = false;
    } catch (const std::exception& e) {
      toggled_.unsure(pid);
      o_.log_.info("checkpoint " + id_ + ": newcomer pid " + std::to_string(pid) + ": " + e.what());
      ok = false;
    }
    return true;
  });
  // A newcomer that ended is nothing to take in: the next round's scan no longer finds it.
  auto gone = o_.ended_among(ending, kEndingGrace);
  for (pid_t pid : ending)
    if (!gone.contains(pid)) ok = false;
  ph.done((taken.empty() ? std::string("none taken in") : "pids " + comma_list(taken) + " locked and checkpointed") +
          (gone.empty() ? "" : ", " + comma_list(pids_of(gone)) + " ended meanwhile"));
  return ok && (!taken.empty() || !gone.empty());
}

// Device holders now that are neither toggled nor among the scan's holders (all: every holder now).
Orchestrator::Attempt::Holders Orchestrator::Attempt::untoggled_newcomers(Holders* all) {
  auto left = by_pid(o_.scanner_.scan(o_.lister_.list()));
  Holders fresh;
  for (const auto& [pid, hs] : left)
    if (!toggled_.toggled(pid) && !c_->holders.count(pid)) fresh[pid] = hs;
  if (all) *all = std::move(left);
  return fresh;
}

std::optional<Orchestrator::Again> Orchestrator::Attempt::verify() {
  Holders left;
  for (int round = 0;; ++round) {
    auto fresh = untoggled_newcomers(&left);  // a process started meanwhile counts too
    if (hold_.on() || fresh.empty() || round == kUnheldRounds) break;
    if (!take_in_unheld(fresh)) {
      if (!may_retry_) break;
      return Again{.pids = pids_of(fresh)};
    }
  }
  Phase ph = phase("verify");
  // What the snapshot releases may remain: a released process's inherited fds and its mappings of
  // the released devices, nothing more.
  std::size_t released = 0;
  const ReleasePlan& plan = c_->release;
  for (const auto& p : plan.processes) {
    auto it = left.find(p.pid);
    if (it == left.end()) continue;
    bool only_released = std::all_of(it->second.begin(), it->second.end(), [&](const Holder& h) {
      // By number where the scan saw one (the host), else by path (a sandbox's scan).
      bool dev = h.device != 0 ? std::binary_search(plan.devices.begin(), plan.devices.end(), h.device)
                               : std::find(p.paths.begin(), p.paths.end(), h.path) != p.paths.end();
      return dev && (h.kind == HolderKind::Mapping || std::find(p.fds.begin(), p.fds.end(), h.fd) != p.fds.end());
    });
    if (!only_released) continue;
    left.erase(it);
    ++released;
  }
  ph.done(std::to_string(left.size()) + " holders left" +
          (released ? ", " + count_processes(released) + " with inherited files to release" : ""));
  if (left.empty()) return std::nullopt;
  std::vector<ProcessReport> rows;
  for (const auto& [pid, hs] : left) {
    ProcessReport r = o_.report_for(pid, hs);
    try {
      r.cuda_state = state_name(o_.toggler_->get_state(pid));
    } catch (const std::exception&) {
      r.cuda_state = "(no CUDA)";
    }
    r.hint = hint_still_holds(pid, r.cuda_state, hs.front().path, toggled_.toggled(pid),
                              std::binary_search(pids_.begin(), pids_.end(), pid));
    rows.push_back(std::move(r));
  }
  throw rollback(
      std::move(rows), Code::FailedPrecondition, "refused",
      count_processes(left.size()) + (left.size() == 1 ? " still holds" : " still hold") + " GPU devices after CUDA toggle");
}

}  // namespace nvproxy::checkpoint
