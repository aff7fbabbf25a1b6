#include "shim/task/gpu_checkpoint.h"

#include "shim/task/checkpoint_wiring.h"

namespace nvproxy::shim {

namespace {

SessionSubject subject_of(Container& c) {
  return {.runtime = c.runtime(),
          .id = c.id(),
          .bundle = c.bundle(),
          .gpu = c.gpu(),
          .cfg = c.config().checkpoint,
          .content_store = c.config().checkpoint.content_store};
}

}  // namespace

void GpuCheckpointHooks::checkpoint(Container& c, const oci::CheckpointFlags& flags, bool paused) {
  SessionWiring w(subject_of(c), &flags, false, runner_, log_);
  w.session().checkpoint({.leave_running = flags.leave_running, .paused = paused, .image_path = flags.image_path});
}

bool GpuCheckpointHooks::before_restore(Container& c, const std::filesystem::path& image) {
  SessionWiring w(subject_of(c), nullptr, true, runner_, log_);
  return w.session().before_restore(image);
}

void GpuCheckpointHooks::after_restore(Container& c, const std::filesystem::path& image, bool left_stopped) {
  SessionWiring w(subject_of(c), nullptr, true, runner_, log_);
  w.session().after_restore(image, left_stopped);
}

}  // namespace nvproxy::shim
