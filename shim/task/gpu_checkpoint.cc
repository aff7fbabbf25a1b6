#include "shim/task/gpu_checkpoint.h"

#include "checkpoint/image/skopeo_registry.h"
#include "shim/task/checkpoint_wiring.h"

namespace nvproxy::shim {

namespace {

SessionSubject subject_of(Container& c) {
  return {.runtime = c.runtime(),
          .id = c.id(),
          .bundle = c.bundle(),
          .ns = c.bundle().parent_path().filename().string(),  // containerd's bundles are STATE/NS/ID
          .gpu = c.gpu(),
          .cfg = c.config().checkpoint,
          .content_store = c.config().checkpoint.content_store};
}

}  // namespace

void GpuCheckpointHooks::checkpoint(Container& c, const oci::CheckpointFlags& flags, bool paused) {
  SessionWiring w(subject_of(c), &flags, false, runner_, log_);
  const auto& cfg = c.config().checkpoint;
  w.session().checkpoint({.leave_running = flags.leave_running,
                          .paused = paused,
                          .image_path = flags.image_path,
                          .image_store = cfg.image_store,
                          .image_store_keep = cfg.image_store_keep});
}

void GpuCheckpointHooks::restore(Container& c, const std::filesystem::path& checkpoint, const RuntimeRestore& run_restore) {
  SessionSubject s = subject_of(c);
  s.run_restore = run_restore;
  SessionWiring w(s, nullptr, true, runner_, log_);
  const auto& cfg = c.config().checkpoint;
  checkpoint::SkopeoRegistry registry({.tls_verify = cfg.registry_tls_verify,
                                       .authfile = cfg.registry_authfile,
                                       .timeout = std::chrono::seconds(cfg.registry_timeout_s)},
                                      runner_);
  w.session().restore({.checkpoint = checkpoint, .image_store = cfg.image_store, .registry = &registry});
}

}  // namespace nvproxy::shim
