// Orchestrator::decide: the one policy of a checkpoint and of `diagnose` (orchestrator.h).
#include <algorithm>

#include "checkpoint/orchestrator/orchestrator.h"
#include "checkpoint/orchestrator/orchestrator_parts.h"
#include "checkpoint/preflight/space_check.h"
#include "checkpoint/report/hints.h"

namespace nvproxy::checkpoint {

using namespace detail;

Orchestrator::Decision Orchestrator::decide(const CheckpointRequest& req, const std::vector<pid_t>& pids, const Classified* c,
                                            std::vector<PhaseTiming>& phases) {
  Decision d;
  const std::string& id = req.container_id;
  if ((d.refusal = runtime_refusal(pids, d, phases, id))) return d;
  if (!c) return d;
  if ((d.refusal = blocker_refusal(*c))) return d;
  {
    Phase pre(phases, log_, id, "preflight");
    d.preflight = preflight(*c);
    if (auto r = refusal(d.preflight)) {
      if (r->processes.empty()) {  // the GPU probe failed: the table names the processes it concerns
        for (pid_t p : c->cuda) {
          ProcessReport rep = report_for(p, c->holders.at(p));
          rep.cuda_state = "running";
          r->processes.push_back(std::move(rep));
        }
      }
      d.refusal = std::move(r);
      return d;
    }
    for (auto& w : preflight_warnings(d.preflight)) d.warnings.push_back(std::move(w));
  }
  if ((d.refusal = outside_tree(req, pids, *c, d))) return d;
  if ((d.refusal = space_refusal(req, pids, *c, d, phases))) return d;
  d.refusal = staging_refusal(req, *c, d, phases);
  return d;
}

// Can the runtime's snapshot work here at all (snapshot_check.h)? Asked whether or not GPU
// processes are there.
std::optional<Orchestrator::Refusal> Orchestrator::runtime_refusal(const std::vector<pid_t>& pids, Decision& d,
                                                                   std::vector<PhaseTiming>& phases, const std::string& id) {
  if (!can_.checks_snapshot) return std::nullopt;
  Phase ph(phases, log_, id, "runtime");
  std::optional<SnapshotProblem> p = snapshot_check_->check(pids);
  ph.done(p ? "refused" : "ok");
  if (!p) return std::nullopt;
  if (!p->key.empty()) d.details[p->key] = p->details;
  Refusal r{.reason = p->reason, .phase = "runtime"};
  for (const auto& [pid, hint] : p->hints) {
    ProcessReport rep = report_for(pid, {});
    rep.cuda_state = "(not toggled)";
    rep.hint = hint;
    r.processes.push_back(std::move(rep));
  }
  return r;
}

std::optional<Orchestrator::Refusal> Orchestrator::blocker_refusal(const Classified& c) const {
  if (c.blockers.empty()) return std::nullopt;
  std::string holds = count_processes(c.blockers.size()) + (c.blockers.size() == 1 ? " holds" : " hold");
  if (!c.driver_error.empty())
    return Refusal{holds + " GPU devices, but their CUDA state cannot be read: " + c.driver_error, c.blockers, "classify"};
  return Refusal{holds + " GPU devices that the CUDA toggle cannot release", c.blockers, "classify"};
}

// What a restore will not bring back: processes outside the init's tree (exec'd ones).
std::optional<Orchestrator::Refusal> Orchestrator::outside_tree(const CheckpointRequest& req, const std::vector<pid_t>& pids,
                                                                const Classified& c, Decision& d) {
  std::vector<pid_t> outside = outside_init_tree(req.init_pid, pids);
  if (outside.empty()) return std::nullopt;
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
    d.lost.push_back(p);
  }
  d.details["not_restored"] = lost;
  if (!lost_cuda.empty() && !cfg_.allow_lost_cuda_processes) {
    size_t n = lost_cuda.size();
    return Refusal{count_processes(n) + " with CUDA state " + (n == 1 ? "is" : "are") +
                       " outside the init's process tree, and a restore would not bring " + (n == 1 ? "it" : "them") + " back",
                   std::move(lost_cuda), "tree"};
  }
  d.warnings.push_back("processes outside the init's process tree (a restore will not bring them back): " + names +
                       (lost_cuda.empty() ? "" : "; checkpointing anyway (checkpoint.allow_lost_cuda_processes)"));
  return std::nullopt;
}

SpaceVerdict Orchestrator::space_verdict(const CheckpointRequest& req, const SpaceNeed& need) {
  // Under the shim's store (image_store.h) the image is written once; containerd keeps a reference.
  const std::string& store = cfg_.image_store;
  bool in_store = !store.empty() && req.image_path.string().rfind(store + "/", 0) == 0;
  return check_space(need, req.image_path, req.content_store, *space_, in_store ? "image store" : "");
}

// Does the image fit? Asked before any toggle, with the numbers.
std::optional<Orchestrator::Refusal> Orchestrator::space_refusal(const CheckpointRequest& req, const std::vector<pid_t>& pids,
                                                                 const Classified& c, Decision& d,
                                                                 std::vector<PhaseTiming>& phases) {
  if (!can_.checks_space || !cfg_.check_space || req.image_path.empty() || c.cuda.empty()) return std::nullopt;
  Phase sp(phases, log_, req.container_id, "space");
  SpaceNeed need;
  std::vector<ProcessReport> rows;
  for (pid_t p : pids) {
    std::uint64_t mem = space_->process_bytes(p);
    need.process_bytes += mem;
    if (std::find(c.cuda.begin(), c.cuda.end(), p) == c.cuda.end()) continue;
    ProcessReport r = report_for(p, c.holders.at(p));
    r.cuda_state = "running";
    auto dev = req.device_bytes.find(p);
    if (dev == req.device_bytes.end())
      need.device_unknown.push_back(p);
    else
      need.device_bytes += dev->second;
    r.hint = "pid " + std::to_string(p) + " (" + r.name + "): device memory " +
             (dev == req.device_bytes.end() ? std::string("unknown") : format_bytes(dev->second)) + ", process memory " +
             format_bytes(mem);
    rows.push_back(std::move(r));
  }
  SpaceVerdict v;
  try {
    v = space_verdict(req, need);
  } catch (const Error& e) {
    v.json = {{"error", e.what()}};
    d.warnings.push_back(std::string("cannot tell whether the checkpoint fits: ") + e.what());
  }
  d.details["space"] = v.json;
  if (!v.slow.empty()) d.warnings.push_back(v.slow);
  if (!v.small_pages.empty()) d.warnings.push_back(v.small_pages);
  if (!v.fits && req.zero_pages_left_out) {
    d.space_as_allocated = v.reason;
    d.details["space"]["counted_as_written"] = "after the CUDA checkpoint";
    sp.done("does not fit as allocated; counted again as written once device memory is staged");
    return std::nullopt;
  }
  sp.done(v.fits ? "fits" : "does not fit");
  if (v.fits) return std::nullopt;
  return Refusal{v.reason, std::move(rows), "space"};
}

std::optional<Orchestrator::Refusal> Orchestrator::space_as_written(const CheckpointRequest& req, const std::vector<pid_t>& pids,
                                                                    const Classified& c, const std::string& as_allocated,
                                                                    nlohmann::json& details, std::vector<PhaseTiming>& phases) {
  Phase sp(phases, log_, req.container_id, "space_as_written");
  // Device memory is host memory now: each process's share is its memory less its zero pages.
  SpaceNeed need;
  std::uint64_t allocated = 0, zeros = 0;
  std::vector<ProcessReport> rows;
  std::vector<std::string> uncounted;
  for (pid_t p : pids) {
    std::uint64_t mem = space_->process_bytes(p), zero = 0;
    try {
      zero = std::min(mem, space_->zero_bytes(p));
    } catch (const std::exception& e) {
      uncounted.push_back(e.what());
    }
    allocated += mem;
    zeros += zero;
    need.process_bytes += mem - zero;
    auto holder = c.holders.find(p);
    if (holder == c.holders.end()) continue;
    ProcessReport r = report_for(p, holder->second);
    r.cuda_state = "checkpointed";
    r.hint = "pid " + std::to_string(p) + " (" + r.name + "): memory with device memory staged " + format_bytes(mem) +
             ", of it zero pages " + format_bytes(zero);
    rows.push_back(std::move(r));
  }
  SpaceVerdict v;
  try {
    v = space_verdict(req, need);
  } catch (const Error& e) {
    sp.done("cannot tell");
    return Refusal{as_allocated + "; counted again as written, the free space could not be read: " + e.what(), std::move(rows),
                   "space"};
  }
  details["space"]["as_written"] = v.json;
  details["space"]["as_written"]["staged_bytes"] = allocated;
  details["space"]["as_written"]["zero_bytes"] = zeros;
  if (!uncounted.empty()) details["space"]["as_written"]["uncounted"] = uncounted;
  std::string counted = format_bytes(need.process_bytes) + " to write of " + format_bytes(allocated) + " staged (" +
                        format_bytes(zeros) + " of zero pages left out)";
  sp.done((v.fits ? "fits: " : "does not fit: ") + counted);
  if (v.fits) return std::nullopt;
  return Refusal{"the checkpoint image does not fit even without its zero pages: " + counted + "; " + v.reason +
                     "; as allocated: " + as_allocated,
                 std::move(rows), "space"};
}

Orchestrator::Preflight Orchestrator::preflight(const Classified& c) {
  Preflight pf;
  if (can_.probes_gpus) pf.gpus = probe_gpus(pf.probe_error);
  for (pid_t pid : c.cuda) {
    auto g = pf.gpus.find(pid);
    if (g == pf.gpus.end() || g->second.size() < 2) continue;
    ProcessReport r = report_for(pid, c.holders.at(pid));
    r.cuda_state = "running";
    r.gpus.assign(g->second.begin(), g->second.end());
    r.hint = hint_multi_gpu(pid, g->second);
    pf.multi_gpu.push_back(std::move(r));
  }
  if (can_.probes_collectives) pf.ranks = collective_ranks(c, pf.gpus);
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
    if (!can_.holds_still && !pi->unheld_lib.empty()) {
      ProcessReport r = row();
      r.hint = "pid " + std::to_string(pid) + " (" + r.name + ") maps " + pi->unheld_lib +
               " (JAX's XLA), whose threads touch device memory on their own; while its CUDA state is checkpointed that "
               "kills the process, and nothing can hold it still here (" +
               (hold_unavailable_.empty() ? std::string("checkpoint.hold_still is off") : hold_unavailable_) +
               "): run it under runc or crun with checkpoint.hold_still, or stop it before checkpointing";
      pf.unheld.push_back(std::move(r));
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
  if (!pf.unheld.empty())
    return Refusal{count_processes(pf.unheld.size()) + (pf.unheld.size() == 1 ? " runs" : " run") +
                       " threads that touch device memory while CUDA-checkpointed, and cannot be held still here",
                   pf.unheld};
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
  for (const auto& r : pf.unheld)
    w.push_back("pid " + std::to_string(r.pid) +
                " runs threads that touch device memory while checkpointed and is not held still; checkpointing anyway "
                "(checkpoint.allow_unrestorable): it may die");
  return w;
}

}  // namespace nvproxy::checkpoint
