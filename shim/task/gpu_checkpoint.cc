#include "shim/task/gpu_checkpoint.h"

#include "shim/task/checkpoint_flow.h"
#include "shim/task/runsc_checkpoint.h"

namespace nvproxy::shim {

namespace {
CheckpointTarget target_of(Container& c, const std::string& restore_from = "") {
  return {.id = c.id(),
          .bundle = c.bundle(),
          .config = c.config(),
          .runtime = &c.runtime(),
          .gpu = c.gpu(),
          .restore_from = restore_from};
}
// A GPU container under gVisor: its processes are seen and toggled inside the sandbox.
bool in_sandbox(Container& c) {
  return c.gpu() && c.runtime().kind() == oci::RuntimeKind::Runsc;
}
}  // namespace

void GpuCheckpointHooks::checkpoint(Container& c, const oci::CheckpointFlags& flags, bool paused) {
  CheckpointTarget t = target_of(c);
  if (in_sandbox(c)) return run_sandbox_checkpoint(t, flags, paused, CheckpointEnv{log_, runner_});
  run_checkpoint(t, flags, paused, CheckpointEnv{log_, runner_});
}

void GpuCheckpointHooks::before_restore(Container& c, const std::filesystem::path& image) {
  CheckpointTarget t = target_of(c, image.string());
  check_restore_host(t, CheckpointEnv{log_, runner_});
}

void GpuCheckpointHooks::after_restore(Container& c, const std::filesystem::path& image) {
  CheckpointTarget t = target_of(c, image.string());
  if (in_sandbox(c)) return restore_sandbox_cuda(t, CheckpointEnv{log_, runner_});
  restore_cuda_after_runtime_restore(t, CheckpointEnv{log_, runner_});
}

}  // namespace nvproxy::shim
