// Orchestrator::inspect: what `diagnose` shows, decided by the checkpoint's own decide().
#include <mutex>

#include "checkpoint/orchestrator/orchestrator.h"
#include "checkpoint/orchestrator/orchestrator_parts.h"

namespace nvproxy::checkpoint {

using namespace detail;

Inspection Orchestrator::inspect(const CheckpointRequest& req) {
  Inspection ins;
  Diagnostic& d = ins.diagnostic;
  const std::string& id = req.container_id;
  d.container = id;
  std::vector<pid_t> pids = lister_.list();
  std::vector<Holder> holders = scanner_.scan(pids);
  if (!can_.toggles_cuda) {
    for (const auto& [pid, hs] : by_pid(holders)) {
      ProcessReport r = report_for(pid, hs);
      r.cuda_state = "(not checked)";
      d.processes.push_back(std::move(r));
    }
    d.reason = count_processes(d.processes.size()) + (d.processes.size() == 1 ? " holds" : " hold") +
               " GPU devices; CUDA toggling is off (checkpoint.cuda: none)";
    return ins;
  }
  std::vector<PhaseTiming> phases;  // not reported: nothing ran
  std::optional<Classified> c;
  if (!holders.empty()) c = classify(id, holders);
  Decision dec = decide(req, pids, c ? &*c : nullptr, phases);
  for (const auto& [k, v] : dec.details.items()) d.details[k] = v;
  d.warnings = dec.warnings;
  const Preflight& pf = dec.preflight;
  if (!pf.probe_error.empty()) d.warnings.push_back("cannot tell which GPUs the processes use: " + pf.probe_error);

  // The table: every holder with its state, the decision's hints on the rows it concerns.
  std::map<pid_t, ProcessReport> rows;
  if (c) {
    for (const auto& b : c->blockers) rows[b.pid] = b;
    for (pid_t pid : c->cuda) {
      ProcessReport r = report_for(pid, c->holders.at(pid));
      r.cuda_state = "running";
      if (auto g = pf.gpus.find(pid); g != pf.gpus.end()) r.gpus.assign(g->second.begin(), g->second.end());
      rows[pid] = std::move(r);
    }
  }
  if (c)
    for (const auto& p : c->release.processes) {
      ProcessReport r = report_for(p.pid, c->holders.at(p.pid));
      r.cuda_state = "(no CUDA)";
      r.inherited_from = p.from;
      r.inherited_fds = p.fds;
      r.hint = "pid " + std::to_string(p.pid) + " (" + r.name + ") holds only GPU device files of CUDA process " +
               std::to_string(p.from) + " (fd " + comma_list(p.fds) +
               "), forked without a CUDA context of its own: a checkpoint leaves them out of the image";
      rows[p.pid] = std::move(r);
    }
  for (const auto* found : {&pf.multi_gpu, &pf.ranks, &pf.ipc, &pf.managed})
    for (const auto& r : *found) rows[r.pid].hint = r.hint;
  if (dec.refusal)
    for (const auto& r : dec.refusal->processes) {
      auto [it, fresh] = rows.emplace(r.pid, r);
      if (!fresh && !r.hint.empty()) it->second.hint = r.hint;
    }
  // CUDA processes without device holders (e.g. left checkpointed) matter too. Without a driver
  // there is nothing to ask: the holders' rows already say so.
  if (!c || c->driver_error.empty()) {
    std::mutex mu;
    std::vector<pid_t> rest;
    for (pid_t p : pids)
      if (!c || !c->holders.count(p)) rest.push_back(p);
    try {
      toggle_all(rest, cfg_.parallelism, [&](pid_t pid) {
        CudaState s = toggler_->get_state(pid);
        ProcessReport r = report_for(pid, {});
        r.cuda_state = state_name(s);
        if (s != CudaState::Running) r.hint = "pid " + std::to_string(pid) + " is CUDA-" + r.cuda_state + " and holds no device";
        std::lock_guard lk(mu);
        rows.try_emplace(pid, std::move(r));
      });
    } catch (const std::exception& e) {
      d.warnings.push_back(std::string("the CUDA state of processes without devices cannot be read: ") + e.what());
    }
  }
  for (auto& [_, r] : rows) d.processes.push_back(std::move(r));

  // diagnose refuses what a checkpoint would; a GPU probe that failed is only a warning here (the
  // checkpoint refuses it unless checkpoint.allow_unrestorable, and says so).
  bool probe_only = dec.refusal && dec.refusal->phase == "preflight" && !pf.probe_error.empty();
  if (dec.refusal && !probe_only) {
    ins.would_refuse = true;
    d.reason = "a checkpoint would be refused: " + dec.refusal->reason;
  } else {
    d.reason = count_processes(pids.size()) + ", " + std::to_string(c ? c->cuda.size() : 0) + " CUDA device holders to toggle";
  }
  return ins;
}

}  // namespace nvproxy::checkpoint
