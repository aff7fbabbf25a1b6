// One attempt at a checkpoint, internal to the orchestrator's files: it owns everything the attempt
// found and did (its report, the scan, the classification, the decision, the processes held still,
// the staging's hold, what was toggled) and runs the phases after the decision as its methods:
//
//   scan -> classify -> decide -> staging -> lock all -> hold (newcomers) -> checkpoint all ->
//   verify -> snapshot -> resume
//
// An attempt ends in one of three ways: the checkpoint's outcome; "again, with these newcomers"
// (Again: processes holding GPU devices started meanwhile, or holders not yet CUDA processes), with
// everything it toggled brought back; or the attempt's Error, its diagnostic written, everything it
// toggled brought back (Orchestrator::checkpoint_around's contract). Its guards are members, so that
// any way out brings CUDA back first, then lets the container go, then puts the memory limits back.
#pragma once

#include <exception>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "checkpoint/attempt/attempt_guards.h"
#include "checkpoint/orchestrator/orchestrator.h"
#include "checkpoint/orchestrator/orchestrator_parts.h"

namespace nvproxy::checkpoint {

// A process that holds GPU devices and started after the scan (a job runner's next worker) was not
// locked: the attempt is undone (nothing it toggled stays toggled) and made again, from a scan that
// sees it. The last attempt lets verify refuse it as any other holder. The same for holders that are
// not CUDA processes yet or any more (between the opening of a device and the end of cuInit, or
// between CUDA's teardown and the exit): a moment's state, scanned again a moment later.
struct Orchestrator::Again {
  std::vector<pid_t> pids;
  bool not_cuda = false;  // holders without CUDA, found before anything was toggled
  bool ending = false;    // CUDA processes whose checkpoint failed as they ended
};

class Orchestrator::Attempt {
 public:
  // may_retry: an Again may still be answered (false on the last attempt: its phases refuse instead).
  Attempt(Orchestrator& o, const CheckpointRequest& req, bool may_retry, NotCudaSeen& seen);
  Attempt(const Attempt&) = delete;
  Attempt& operator=(const Attempt&) = delete;

  // Throws the attempt's Error (refused, failed, out of time) with its diagnostic written.
  std::variant<CheckpointOutcome, Again> run(const ReleasingSnapshotFn& snapshot);

 private:
  using Holders = std::map<pid_t, std::vector<Holder>>;

  // The report (attempt.cc): every refusal and failure ends in fail(), with the JSON written and
  // the text returned to throw; a rollback brings back what was toggled first.
  detail::Phase phase(const std::string& name);
  Error fail(Code code, std::string verdict, std::string reason);
  // summarize: the reason ends with what the rollback did ("CUDA restored in pids 4,5").
  Error rollback(std::vector<ProcessReport> rows, Code code, std::string verdict, std::string reason, bool summarize = false);
  // Before another attempt: everything toggled brought back; one that stays stuck ends the checkpoint.
  Again undo(Again again);
  void done();

  // Before anything is toggled (attempt.cc).
  void scan();
  void classify();
  std::optional<Again> decide();  // throws the refusal
  bool only_passing_holders();
  void hold_staging();
  void lock_all();                                                                        // attempt_toggle.cc
  std::optional<Again> checkpoint_all();                                                  // attempt_toggle.cc
  void resume();                                                                          // attempt_toggle.cc
  std::vector<pid_t> drop_ended(std::map<pid_t, CudaError>& failed, const char* before);  // attempt_toggle.cc
  std::vector<ProcessReport> failure_rows(const std::map<pid_t, CudaError>& failed);      // attempt_toggle.cc
  Holders hold_still(const std::vector<pid_t>& scanned);                                  // attempt_newcomers.cc
  std::optional<Again> take_in_newcomers(Holders fresh);                                  // attempt_newcomers.cc
  std::vector<pid_t> when_cuda_running(std::vector<pid_t> waiting, const std::function<bool(pid_t)>& take);
  bool take_in_unheld(const Holders& fresh);                                // attempt_newcomers.cc
  Holders untoggled_newcomers(Holders* all = nullptr);                      // attempt_newcomers.cc
  std::optional<Again> verify();                                            // attempt_newcomers.cc
  std::optional<Again> take_snapshot(const ReleasingSnapshotFn& snapshot);  // attempt_snapshot.cc
  void snapshot_only(const ReleasingSnapshotFn& snapshot);                  // attempt_snapshot.cc

  Orchestrator& o_;
  const CheckpointRequest& req_;
  const std::string& id_;
  const bool may_retry_;
  NotCudaSeen& seen_;

  CheckpointOutcome out_;
  Diagnostic diag_;
  std::optional<nlohmann::json> deadline_;  // the snapshot ran out of time: phase, command, timeout

  std::vector<pid_t> pids_;      // the container's processes at the scan
  std::vector<Holder> holders_;  // device holders at the scan
  std::optional<Classified> c_;  // none: no device holders (or CUDA toggling is off)
  Decision d_;
  std::set<pid_t> held_;  // held still by the container hold
  // CUDA resumed while the runtime still wrote the image (ReleasePlan::on_resumed), and how that
  // resume failed, rethrown once the runtime is done.
  bool resumed_early_ = false;
  std::exception_ptr early_error_;

  // Declared in this order, destroyed in the reverse: CUDA brought back, then the container let go,
  // then the lifted limits put back and the host's reservation let go.
  StagingHold staging_;
  HoldGuard hold_;
  Toggled toggled_;
};

}  // namespace nvproxy::checkpoint
