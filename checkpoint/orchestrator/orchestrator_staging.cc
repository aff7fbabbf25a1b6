// Orchestrator::staging_refusal and hold_staging_for: the driver's staging of device memory in the
// processes' own memory, billed against every memory limit over the container and the host's
// memory before anything is toggled (staging_bill.h), and the lift that makes room for it.
#include "checkpoint/orchestrator/orchestrator.h"
#include "checkpoint/orchestrator/orchestrator_parts.h"

namespace nvproxy::checkpoint {

using namespace detail;

pid_t staging_anchor(const CheckpointRequest& req) {
  return req.staging_pid > 0 ? req.staging_pid : req.init_pid;
}

std::optional<Orchestrator::Refusal> Orchestrator::staging_refusal(const CheckpointRequest& req, const Classified& c, Decision& d,
                                                                   std::vector<PhaseTiming>& phases) {
  if (!can_.bills_staging || c.cuda.empty()) return std::nullopt;
  Phase ph(phases, log_, req.container_id, "staging");
  StagingBill& bill = d.bill;
  bill.margin = std::uint64_t{cfg_.staging_margin_mib} << 20;
  bill.in_sandbox = req.staging_pid > 0;
  std::vector<pid_t> unknown;
  const std::vector<pid_t> bearers = bill.in_sandbox ? std::vector<pid_t>{req.staging_pid} : c.cuda;
  for (pid_t p : bearers) {
    auto it = req.device_bytes.find(p);
    if (it == req.device_bytes.end()) unknown.push_back(p);
    bill.staged[p] = it == req.device_bytes.end() ? 0 : it->second;
  }
  if (bill.total() == 0) {
    ph.done(unknown.empty() ? "nothing staged" : "device memory unknown");
    if (!unknown.empty())
      d.warnings.push_back("the device memory of pids " + comma_list(unknown) +
                           " is unknown (NVML): what the driver stages in their memory is not billed against the "
                           "container's memory limit");
    return std::nullopt;
  }
  pid_t anchor = staging_anchor(req);
  if (anchor <= 0) anchor = c.cuda.front();
  const StagingMode mode = cfg_.staging_memory;
  try {
    bill.limits = memory_->limits_of(anchor);
    bill.host_available = memory_->host_available();
  } catch (const std::exception& e) {
    ph.done("unread");
    d.warnings.push_back(std::string("the memory limits over the container or the host's memory cannot be read (") + e.what() +
                         "): the driver's staging of " + format_bytes(bill.total()) + " is not billed");
    return std::nullopt;
  }
  if (std::string w = bill_reservations(bill, reservations_, req.container_id); !w.empty()) d.warnings.push_back(std::move(w));
  // Without a record nothing may be lifted: a lift a dead shim could not put back is never made.
  StagingPlan plan = plan_staging(bill, req.lift_record.empty() ? StagingMode::Refuse : mode, "checkpoint");
  d.details["staging"] = plan.json;
  if (!plan.refused) {
    ph.done(plan.lifts.empty() ? "fits" : std::to_string(plan.lifts.size()) + " limits to lift");
    d.staging = std::move(plan);
    return std::nullopt;
  }
  ph.done("refused");
  Refusal r{.reason = plan.reason, .phase = "staging"};
  for (pid_t p : c.cuda) {
    ProcessReport rep = report_for(p, c.holders.at(p));
    rep.cuda_state = "running";
    rep.hint = bill.in_sandbox
                   ? "the driver would stage its device memory in the sandbox's memory (" + format_bytes(bill.total()) +
                         " for the sandbox, host pid " + std::to_string(req.staging_pid) + ")"
                   : "the driver would stage " + format_bytes(bill.staged[p]) + " of its device memory in its memory";
    r.processes.push_back(std::move(rep));
  }
  return r;
}

}  // namespace nvproxy::checkpoint
