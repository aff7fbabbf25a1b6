// The two guards of one checkpoint attempt (attempt.h), internal to the orchestrator's files:
// Toggled owns what was toggled from the first lock on, so that no way out leaves a process locked
// or checkpointed; HoldGuard owns the container's hold (container_hold.h), so that none leaves it
// stopped or frozen.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "checkpoint/orchestrator/orchestrator.h"

namespace nvproxy::checkpoint {

// `believed` is the state each pid was put in; the driver is asked again when bringing it back.
class Orchestrator::Toggled {
 public:
  Toggled(Orchestrator& o, std::string id) : o_(o), id_(std::move(id)) {}
  // Only a way out nobody expected gets here with processes toggled: they are brought back all the same.
  ~Toggled();
  Toggled(const Toggled&) = delete;
  Toggled& operator=(const Toggled&) = delete;

  void record(pid_t pid, CudaState s);
  // A toggle that failed: its state is unknown, bringing it back asks the driver.
  void unsure(pid_t pid);
  [[nodiscard]] bool toggled(pid_t pid) const { return believed_.count(pid) > 0; }
  [[nodiscard]] const std::map<pid_t, CudaState>& believed() const { return believed_; }
  // Every toggled process brought back (a rollback, or before another attempt); the guard is done.
  Resumed bring_back_all();
  // The snapshot is written: what becomes of the toggled processes is the resume's business.
  void release() { released_ = true; }

 private:
  Orchestrator& o_;
  std::string id_;
  std::mutex mu_;
  std::map<pid_t, CudaState> believed_;
  bool released_ = false;
};

// From the hold to the end of the attempt nothing of the container runs but what the driver needs;
// the destructor lets it all go (after the Toggled guard, destroyed first, has brought CUDA back).
// Without a hold (h == nullptr: a sandbox, or checkpoint.hold_still off) every call is a no-op.
class Orchestrator::HoldGuard {
 public:
  HoldGuard(ContainerHold* h, Logger& log, std::string id) : h_(h), log_(log), id_(std::move(id)) {}
  ~HoldGuard() { let_go(); }
  HoldGuard(const HoldGuard&) = delete;
  HoldGuard& operator=(const HoldGuard&) = delete;

  [[nodiscard]] bool on() const { return h_ != nullptr; }
  // The processes held; returns those that ended meanwhile.
  std::vector<pid_t> hold(const std::vector<pid_t>& pids);
  // These alone go on (newcomers let run to their CUDA init); hold() takes them back.
  void release(const std::vector<pid_t>& pids);
  // The runtime's snapshot seizes the processes itself: frozen first, then no longer held by us.
  void hand_to_runtime();
  // After the snapshot, or its failure: held again, then thawed (a frozen thread stops once
  // thawed, before it runs any of its own code); still nothing runs.
  void take_back(const std::vector<pid_t>& pids);
  // The runtime ended the container with its snapshot (not kept running): nothing to thaw.
  void container_ended() { frozen_ = false; }

 private:
  void let_go() noexcept;
  ContainerHold* h_;
  Logger& log_;
  std::string id_;
  bool held_ = false, frozen_ = false;
};

}  // namespace nvproxy::checkpoint
