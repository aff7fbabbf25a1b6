#include "shim/task/gpu_checkpoint.h"

#include "checkpoint/image/kube_restore.h"
#include "common/error.h"
#include "oci/spec.h"
#include "shim/task/checkpoint_wiring.h"
#include "shim/task/registry_client.h"
#include "shim/task/restore_annotation.h"

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
  checkpoint::HttpRegistry registry(registry_options(cfg));
  w.session().restore({.checkpoint = checkpoint,
                       .image_store = cfg.image_store,
                       .registry = &registry,
                       .transfer = transfer_options(
                           cfg, [this](const std::string& line, bool) { log_.info(line); }, false)});
}

std::filesystem::path GpuCheckpointHooks::fetch_for_restore(Container& c, const std::string& reference,
                                                            const std::filesystem::path& into) {
  const std::string who = "create of container \"" + c.id() + "\" from " + reference + ": ";
  const auto& cfg = c.config().checkpoint;
  checkpoint::HttpRegistry registry(registry_options(cfg));
  checkpoint::KubeCheckpoint image;
  try {
    image = checkpoint::fetch_kube_checkpoint(reference, into, registry, runner_);
  } catch (const Error& e) {
    throw Error(e.code(), who + e.what());
  }
  log_.info(who + "the checkpoint image of container " + image.container + " is unpacked in " + image.dir.string());
  // What the image's processes were allowed against what this container grants, before any bulk.
  auto mismatches = restore_mismatches(image.spec, image.config, oci::Spec::load(c.bundle()).json());
  if (!mismatches.empty()) {
    std::string text = who + "refused:";
    for (const auto& m : mismatches) text += " " + m + ";";
    text.pop_back();
    log_.warn(text);
    throw Error(Code::FailedPrecondition, text);
  }
  // The record against this host (GPUs, driver, runtime), then the memory into the store.
  SessionWiring w(subject_of(c), nullptr, true, runner_, log_);
  w.session().fetch({.checkpoint = image.checkpoint(), .image_store = cfg.image_store, .registry = &registry});
  return image.dir;
}

}  // namespace nvproxy::shim
