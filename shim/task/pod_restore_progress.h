// A gVisor pod restored whole (pod_restore_annotation.h): runsc resumes the sandbox only once the
// last of its containers is restored, so what needs the sandbox running (CUDA back in the
// processes that hold it) waits for that moment. This keeps, per pod, which containers were
// restored and what waits; CRI starts the containers one by one, so the last one's start runs it.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace nvproxy::shim {

class PodRestoreProgress {
 public:
  using Later = std::function<void()>;

  // Container `name` of the pod `sandbox`, which restores the containers `names`, was restored;
  // `later` (may be empty) runs once the pod's sandbox runs. Returns what is to run now: every
  // container's `later`, when this was the last of `names`, else nothing.
  std::vector<Later> restored(const std::string& sandbox, const std::vector<std::string>& names, const std::string& name,
                              Later later);
  // The pod's restore begins (its sandbox container's): waiting() from now on.
  void begin(const std::string& sandbox);
  // The pod is gone or failed: what waited is dropped.
  void forget(const std::string& sandbox);
  // Between begin() and its last container's restored().
  bool waiting(const std::string& sandbox) const;
  // How many containers of the pod were restored so far (for the log).
  std::size_t count(const std::string& sandbox) const;

 private:
  struct Pod {
    std::set<std::string> restored;
    std::vector<Later> waiting;
  };
  mutable std::mutex mu_;
  std::map<std::string, Pod> pods_;
};

}  // namespace nvproxy::shim
