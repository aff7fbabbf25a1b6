// Orchestrator::checkpoint_around: the attempts of one checkpoint (attempt.h runs each), made
// again while processes start or end meanwhile, and a workload the kernel killed named as such.
#include <thread>

#include "checkpoint/attempt/attempt.h"

namespace nvproxy::checkpoint {

using namespace detail;

constexpr int kAttemptsWithNewcomers = 4;
constexpr auto kNotCudaRescanAfter = std::chrono::milliseconds(200);

CheckpointOutcome Orchestrator::checkpoint_around(const CheckpointRequest& req, const ReleasingSnapshotFn& snapshot) {
  // A workload the kernel kills during the checkpoint is named as such, whatever phase then failed
  // and in whichever attempt: its own words (a stop that timed out, a process gone) would guess.
  std::optional<OomBaseline> oom;
  if (can_.bills_staging && can_.toggles_cuda)
    oom = oom_baseline(*memory_, staging_anchor(req) > 0 ? memory_->memory_cgroup(staging_anchor(req)) : "");
  // Limits an earlier shim lifted and could not put back go back before any attempt's bill reads them.
  if (can_.bills_staging && !req.lift_record.empty())
    put_back_recorded(*memory_, req.lift_record, log_, "checkpoint of \"" + req.container_id + "\"");
  try {
    // The attempts: made again while processes start or end meanwhile.
    NotCudaSeen seen{.rescan_until = Clock::now() + kNotCudaRescanFor};
    for (int attempt = 1;;) {
      std::variant<CheckpointOutcome, Again> result = Attempt(*this, req, attempt < kAttemptsWithNewcomers, seen).run(snapshot);
      if (auto* done = std::get_if<CheckpointOutcome>(&result)) return std::move(*done);
      const Again& again = std::get<Again>(result);
      if (again.not_cuda) {  // bounded by seen.rescan_until, not by the attempts
        log_.info("checkpoint " + req.container_id + ": pids " + comma_list(again.pids) +
                  " hold GPU devices without CUDA (starting or ending?); scanning again in " +
                  std::to_string(kNotCudaRescanAfter.count()) + " ms");
        std::this_thread::sleep_for(kNotCudaRescanAfter);
        continue;
      }
      if (again.ending) {
        log_.info("checkpoint " + req.container_id + ": pids " + comma_list(again.pids) +
                  " answered their CUDA checkpoint as ending processes do (OPERATING_SYSTEM); CUDA brought back, "
                  "scanning again");
      } else {
        log_.info("checkpoint " + req.container_id + ": " + count_processes(again.pids.size()) + " holding GPU devices (pids " +
                  comma_list(again.pids) + ") started during attempt " + std::to_string(attempt) +
                  "; its CUDA locks undone, scanning again");
      }
      ++attempt;
    }
  } catch (const Error& e) {
    std::string cause = oom ? oom_cause(*memory_, *oom) : "";
    if (cause.empty()) throw;
    log_.warn("checkpoint " + req.container_id + ": " + cause);
    throw Error(e.code(), "checkpoint of \"" + req.container_id + "\" failed: " + cause + "; then: " + e.what());
  }
}

}  // namespace nvproxy::checkpoint
