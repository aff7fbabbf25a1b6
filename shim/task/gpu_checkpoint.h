// The CheckpointHooks the daemon uses: a thin adapter from the task layer's Container to the
// checkpoint use case (checkpoint/session/session.h), through the one wiring of a session
// (checkpoint_wiring.h); everything else about a checkpoint lives in checkpoint/.
#pragma once

#include "checkpoint/image/pod_record.h"
#include "shim/task/container.h"
#include "shim/task/pod_restore_progress.h"

namespace nvproxy::shim {

class GpuCheckpointHooks final : public CheckpointHooks {
 public:
  GpuCheckpointHooks(Logger& log, ProcessRunner& runner) : log_(log), runner_(runner) {}
  void checkpoint(Container& c, const oci::CheckpointFlags& flags, bool paused) override;
  void restore(Container& c, const std::filesystem::path& checkpoint, const RuntimeRestore& run_restore) override;
  std::filesystem::path fetch_for_restore(Container& c, const std::string& reference, const std::filesystem::path& into) override;
  void refuse_pod_image_under_runc(const std::string& who, const std::string& reference, const std::filesystem::path& into,
                                   const ShimConfig& cfg) override;
  [[nodiscard]] bool pod_restoring(const std::string& sandbox) const override { return pods_.waiting(sandbox); }
  void pod_restore_over(const std::string& sandbox) override { pods_.forget(sandbox); }

 private:
  Logger& log_;
  ProcessRunner& runner_;
  PodRestoreProgress pods_;  // the gVisor pods being restored whole (one shim serves a CRI pod)
};

}  // namespace nvproxy::shim
