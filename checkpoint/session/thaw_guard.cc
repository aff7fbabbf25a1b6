#include "checkpoint/session/thaw_guard.h"

#include <exception>

namespace nvproxy::checkpoint {

ThawGuard::ThawGuard(SessionRuntime& rt, std::string id, bool active, Logger& log)
    : rt_(rt), id_(std::move(id)), log_(log), active_(active) {
  if (!active_) return;
  log_.info("checkpoint of \"" + id_ + "\": thawing the paused container for the CUDA toggles");
  rt_.resume();
}

ThawGuard::~ThawGuard() {
  if (!active_) return;
  // The cgroup v1 freezer gives up on busy tasks under load (runc: "unable to freeze"); a second
  // try mostly succeeds. Left running, the client's resume still finds it running (Resume).
  for (int attempt = 1;; ++attempt) {
    try {
      rt_.pause();
      return;
    } catch (const std::exception& e) {
      if (attempt < kPauseAttempts) continue;
      log_.error("checkpoint of \"" + id_ + "\": could not pause it again (" + std::to_string(attempt) +
                 " tries), it runs: " + e.what());
      return;
    }
  }
}

std::string ThawGuard::after_killed_snapshot(bool client_paused) {
  std::string status;
  try {
    status = rt_.status();
  } catch (const std::exception& e) {
    log_.error("checkpoint of \"" + id_ + "\": after the killed snapshot: " + e.what());
    return std::string("container state unknown, not thawed: ") + e.what();
  }
  if (status != "paused") return "container was not frozen (" + status + ")";
  if (client_paused && !active_) return "container left paused, as the client had paused it";
  try {
    rt_.resume();
  } catch (const std::exception& e) {
    log_.error("checkpoint of \"" + id_ + "\": cannot thaw it after the killed snapshot: " + e.what());
    return std::string("container is still FROZEN, thawing failed: ") + e.what();
  }
  log_.info("checkpoint of \"" + id_ + "\": thawed after the killed snapshot");
  // With the client's pause, the destructor freezes it again once CUDA is rolled back.
  return client_paused ? "container thawed for the CUDA rollback (then paused again, as the client had paused it)"
                       : "container thawed";
}

}  // namespace nvproxy::checkpoint
