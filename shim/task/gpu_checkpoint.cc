#include "shim/task/gpu_checkpoint.h"

#include "shim/task/checkpoint_flow.h"

namespace nvproxy::shim {

void GpuCheckpointHooks::checkpoint(Container& c, const oci::CheckpointFlags& flags, bool paused) {
  CheckpointTarget t{.id = c.id(), .bundle = c.bundle(), .config = c.config(), .runtime = &c.runtime(), .gpu = c.gpu()};
  run_checkpoint(t, flags, paused, CheckpointEnv{log_, runner_});
}

void GpuCheckpointHooks::after_restore(Container& c, const std::filesystem::path& image) {
  CheckpointTarget t{.id = c.id(),
                     .bundle = c.bundle(),
                     .config = c.config(),
                     .runtime = &c.runtime(),
                     .gpu = c.gpu(),
                     .restore_from = image.string()};
  restore_cuda_after_runtime_restore(t, CheckpointEnv{log_, runner_});
}

}  // namespace nvproxy::shim
