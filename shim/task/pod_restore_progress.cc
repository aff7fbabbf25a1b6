#include "shim/task/pod_restore_progress.h"

namespace nvproxy::shim {

std::vector<PodRestoreProgress::Later> PodRestoreProgress::restored(const std::string& sandbox,
                                                                    const std::vector<std::string>& names,
                                                                    const std::string& name, Later later) {
  std::lock_guard lk(mu_);
  Pod& pod = pods_[sandbox];
  pod.restored.insert(name);
  if (later) pod.waiting.push_back(std::move(later));
  for (const auto& n : names)
    if (!pod.restored.count(n)) return {};
  std::vector<Later> now = std::move(pod.waiting);
  pods_.erase(sandbox);
  return now;
}

void PodRestoreProgress::begin(const std::string& sandbox) {
  std::lock_guard lk(mu_);
  pods_[sandbox];
}

bool PodRestoreProgress::waiting(const std::string& sandbox) const {
  std::lock_guard lk(mu_);
  return pods_.count(sandbox) > 0;
}

void PodRestoreProgress::forget(const std::string& sandbox) {
  std::lock_guard lk(mu_);
  pods_.erase(sandbox);
}

std::size_t PodRestoreProgress::count(const std::string& sandbox) const {
  std::lock_guard lk(mu_);
  auto it = pods_.find(sandbox);
  return it == pods_.end() ? 0 : it->second.restored.size();
}

}  // namespace nvproxy::shim
