// What each process of a container is to a checkpoint: the classification of the device holders
// (CUDA or not, forked children that can be released, collective ranks, processes outside the
// init's tree), each with its report and hint.
#include <signal.h>

#include <algorithm>
#include <mutex>
#include <optional>
#include <set>

#include "checkpoint/orchestrator/orchestrator.h"
#include "checkpoint/orchestrator/orchestrator_parts.h"
#include "checkpoint/report/hints.h"
#include "common/error.h"

namespace nvproxy::checkpoint {

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

}  // namespace nvproxy::checkpoint
