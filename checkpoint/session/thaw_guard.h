// containerd's client pauses a task before it asks for a checkpoint. A frozen CUDA process cannot
// take part in its own lock, checkpoint or restore (the driver needs its threads), and a paused
// runsc sandbox answers no `runsc exec`: while the toggles need the container running it is thawed,
// and frozen again on every way out (the destructor), as the client left it.
#pragma once

#include <string>

#include "checkpoint/session/session_runtime.h"
#include "common/log.h"

namespace nvproxy::checkpoint {

class ThawGuard {
 public:
  // active: the client paused the container and the toggles need it running.
  ThawGuard(SessionRuntime& rt, std::string id, bool active, Logger& log);
  ~ThawGuard();
  ThawGuard(const ThawGuard&) = delete;
  ThawGuard& operator=(const ThawGuard&) = delete;

  [[nodiscard]] bool active() const { return active_; }

  // After the runtime's checkpoint was killed for running out of time: CRIU may have frozen the
  // container (cgroup freezer) and nobody thaws it any more. It is thawed unless the client had
  // paused it and no CUDA rollback needs it running (then it stays paused, as the client left it).
  // Returns what was done, for the error message.
  std::string after_killed_snapshot(bool client_paused);

 private:
  static constexpr int kPauseAttempts = 3;
  SessionRuntime& rt_;
  std::string id_;
  Logger& log_;
  bool active_;
};

}  // namespace nvproxy::checkpoint
