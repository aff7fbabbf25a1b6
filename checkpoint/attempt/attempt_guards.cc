#include "checkpoint/attempt/attempt_guards.h"

#include "checkpoint/orchestrator/orchestrator_parts.h"

namespace nvproxy::checkpoint {

using namespace detail;

Orchestrator::Toggled::~Toggled() {
  if (released_ || believed_.empty()) return;
  try {
    Resumed r = o_.bring_back(pids_of(believed_), believed_);
    o_.log_.error("checkpoint " + id_ + ": rolled back on an unexpected way out: running " + comma_list(r.running) +
                  (r.stuck.empty() ? "" : ", STUCK " + std::to_string(r.stuck.size())));
  } catch (const std::exception& e) {  // a destructor must not throw: the shim would end with it
    o_.log_.error("checkpoint " + id_ + ": could not bring CUDA back on an unexpected way out: " + e.what());
  }
}

void Orchestrator::Toggled::record(pid_t pid, CudaState s) {
  std::lock_guard lk(mu_);
  believed_[pid] = s;
}

void Orchestrator::Toggled::unsure(pid_t pid) {
  std::lock_guard lk(mu_);
  believed_.emplace(pid, CudaState::Running);
}

Orchestrator::Resumed Orchestrator::Toggled::bring_back_all() {
  released_ = true;  // asked once: a second try on a way out that failed would not do better
  return o_.bring_back(pids_of(believed_), believed_);
}

std::vector<pid_t> Orchestrator::HoldGuard::hold(const std::vector<pid_t>& pids) {
  if (!h_) return {};
  held_ = true;
  return h_->hold(pids);
}

void Orchestrator::HoldGuard::release(const std::vector<pid_t>& pids) {
  if (h_) h_->release(pids);
}

void Orchestrator::HoldGuard::hand_to_runtime() {
  if (!h_) return;
  h_->freeze();
  frozen_ = true;
  h_->release();
  held_ = false;
}

void Orchestrator::HoldGuard::take_back(const std::vector<pid_t>& pids) {
  if (!h_) return;
  held_ = true;
  h_->hold_frozen(pids);
  h_->thaw();
  frozen_ = false;
  h_->settle();
}

void Orchestrator::HoldGuard::let_go() noexcept {
  if (held_) try {
      h_->release();
    } catch (const std::exception& e) {
      log_.error("checkpoint " + id_ + ": could not let the held processes go: " + e.what());
    }
  if (frozen_) try {
      h_->thaw();
    } catch (const std::exception& e) {
      log_.error("checkpoint " + id_ + ": could not thaw the container: " + e.what());
    }
  held_ = frozen_ = false;
}

}  // namespace nvproxy::checkpoint
