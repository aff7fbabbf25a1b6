// Orchestrator::Attempt: the runtime's snapshot, with CUDA checkpointed around it or alone
// (attempt.h).
#include "checkpoint/attempt/attempt.h"

namespace nvproxy::checkpoint {

using namespace detail;

std::optional<Orchestrator::Again> Orchestrator::Attempt::take_snapshot(const ReleasingSnapshotFn& snapshot) {
  Phase ph = phase("snapshot");
  if (hold_.on()) try {
      hold_.hand_to_runtime();
    } catch (const std::exception& e) {
      ph.done("failed");
      throw rollback({}, Code::FailedPrecondition, "failed",
                     std::string("the container could not be frozen for the runtime's snapshot: ") + e.what(), true);
    }
  // Whatever the snapshot did, the processes are held again before anything of them runs: a
  // rollback or the resume lets the driver in, and nothing else.
  auto take_back = [&] {
    if (!hold_.on() || resumed_early_) return;
    try {
      hold_.take_back(o_.lister_.list());
    } catch (const std::exception& e) {
      out_.warnings.push_back(std::string("the container could not be held again after the snapshot (it runs until "
                                          "CUDA is back): ") +
                              e.what());
      o_.log_.error("checkpoint " + id_ + ": " + out_.warnings.back());
    }
  };
  ReleasePlan plan = c_->release;
  std::optional<Phase> writing;  // from CRIU's early resume to the image's end
  if (req_.keep_running)
    plan.on_resumed = [&] {
      // The runtime's thread waits for runc meanwhile; nothing else of the attempt runs.
      try {
        ph.done("until the processes ran again; the image is written after");
        take_back();
        resumed_early_ = true;
        resume();
      } catch (...) {
        early_error_ = std::current_exception();
      }
      writing.emplace(out_.phases, o_.log_, id_, "write_after_resume");
    };
  try {
    snapshot(plan);
    if (writing) writing->done();
    if (req_.keep_running)
      take_back();
    else
      hold_.container_ended();
  } catch (const Error& e) {
    take_back();
    if (e.code() == Code::DeadlineExceeded) {
      ph.done("out of time");
      SnapshotDeadline d = snapshot_deadline(e);
      deadline_ = d.json;
      throw rollback({}, Code::DeadlineExceeded, "failed", d.reason, true);
    }
    ph.done("failed");
    // Without a hold a CUDA process can start between the verify and the runtime's own pause (a
    // job runner's next worker under runsc: "Can't save pma ... nvproxy.frontendFDMemmapFile"):
    // that is a newcomer, and the attempt is made again.
    if (!hold_.on() && may_retry_)
      if (auto fresh = untoggled_newcomers(); !fresh.empty()) {
        std::string what = e.what();
        o_.log_.info("checkpoint " + id_ + ": the runtime's checkpoint failed (" + what.substr(0, what.find('\n')) +
                     ") with CUDA processes started after the verify");
        return Again{.pids = pids_of(fresh)};
      }
    throw rollback({}, e.code(), "failed", std::string("the runtime's checkpoint failed: ") + e.what());
  } catch (const std::exception& e) {
    take_back();
    ph.done("failed");
    throw rollback({}, Code::Internal, "failed", std::string("the runtime's checkpoint failed: ") + e.what());
  }
  if (early_error_) std::rethrow_exception(early_error_);
  return std::nullopt;
}

// The snapshot alone (nothing toggled): its errors pass through, but a deadline is written down.
void Orchestrator::Attempt::snapshot_only(const ReleasingSnapshotFn& snapshot) {
  Phase ph = phase("snapshot");
  try {
    snapshot(ReleasePlan{});
  } catch (const Error& e) {
    if (e.code() != Code::DeadlineExceeded) throw;
    ph.done("out of time");
    SnapshotDeadline d = snapshot_deadline(e);
    deadline_ = d.json;
    throw fail(Code::DeadlineExceeded, "failed", d.reason + "; no CUDA process was toggled");
  }
}

}  // namespace nvproxy::checkpoint
