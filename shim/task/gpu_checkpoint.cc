#include "shim/task/gpu_checkpoint.h"

#include "checkpoint/image/image_record.h"
#include "common/error.h"
#include "common/scratch_dir.h"
#include "oci/spec.h"
#include "shim/task/checkpoint_wiring.h"
#include "shim/task/pod_members.h"
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

// A runsc checkpoint of a CRI pod's container saves the pod's whole sandbox: the image records the
// pod, and CUDA is toggled in the pod's GPU containers whichever container the client named (CRI's
// CheckpointContainer names one). The session runs on the first GPU container by name, over the
// processes of every GPU container of the pod (SessionSubject::pod_gpus): one attempt locks CUDA in
// all of them, then checkpoints all, then verifies all, around the one `runsc checkpoint`.
void take_pod(SessionSubject& s, Logger& log) {
  s.pod = pod_of(s.bundle);
  if (!s.pod) return;
  leave_out_ended(*s.pod, s.runtime, s.id, log, "checkpoint of \"" + s.id + "\"");
  std::vector<const checkpoint::PodMember*> gpus;
  for (const auto& m : s.pod->containers)
    if (m.gpus != 0) gpus.push_back(&m);
  std::string names;
  for (const auto& m : s.pod->containers)
    if (!m.sandbox) names += (names.empty() ? "" : ", ") + m.name;
  const std::string who = "checkpoint of \"" + s.id + "\"";
  if (gpus.empty()) {
    log.info(who + ": runsc saves the pod's sandbox whole, its containers " + names + " in one image");
    return;
  }
  std::string list;
  for (const auto* m : gpus) list += (list.empty() ? "" : ", ") + m->name;
  log.info(who + ": runsc saves the pod's sandbox whole (" + names + "); CUDA is toggled in its GPU container" +
           (gpus.size() > 1 ? "s " + list + " as one: every lock before any checkpoint" : " \"" + list + "\"") + " (" +
           gpus.front()->id + (gpus.size() > 1 ? " first" : "") + ")");
  if (gpus.front()->id != s.id) {
    s.client_id = s.id;
    s.id = gpus.front()->id;
    s.bundle = s.bundle.parent_path() / s.id;
    s.gpu = true;
  }
  s.pod_name = gpus.front()->name;
  if (gpus.size() > 1 && joins_pod_pid_namespace(s.bundle)) {
    // shareProcessNamespace: the first GPU container sees (and toggles) every process of the pod,
    // and at restore brings CUDA back in all of them; the image records them all as its own.
    log.info(who +
             ": the pod's containers share one PID namespace: CUDA is toggled in every process of the pod from "
             "container \"" +
             gpus.front()->name + "\", whose record holds them all");
    return;
  }
  for (std::size_t i = 1; i < gpus.size(); ++i) s.pod_gpus.push_back(*gpus[i]);
}

// The pod's image against the pod restored from it (pod_restore_annotation.h), from the record
// that travels with the image (the archive's copy): a pod's image of this runtime, and the
// sandbox's containers the pod's (at the sandbox's create) or this container one of them with as
// many GPUs (at its create).
void check_pod_image(Container& c, const PodRestoreSetup& pr, const checkpoint::KubeCheckpoint& image, const std::string& who,
                     Logger& log) {
  std::optional<checkpoint::ImageRecord> rec;
  try {
    rec = checkpoint::read_image_record(image.checkpoint());
  } catch (const Error& e) {
    throw Error(e.code(), who + e.what());
  }
  auto refuse = [&](const std::string& why) {
    log.warn(who + "refused: " + why);
    throw Error(Code::FailedPrecondition, who + "refused: " + why);
  };
  if (!rec || !rec->pod)
    refuse("the image is a checkpoint of one container (" + (rec ? rec->container : image.container) +
           "), not of a gVisor pod's sandbox: a pod restored whole under runsc needs its pod's image (a checkpoint "
           "of a runsc pod, which records every container of the sandbox)");
  if (!rec->runtime.empty() && rec->runtime != "runsc")
    refuse("the image was written by " + rec->runtime + ", and a pod is restored whole only under runsc");
  if (pr.name.empty()) {
    auto mismatches = checkpoint::pod_name_mismatches(*rec->pod, pr.names);
    if (!mismatches.empty()) {
      std::string text;
      for (const auto& m : mismatches) text += (text.empty() ? "" : "; ") + m;
      refuse(text);
    }
    log.info(who + "the image is pod " + rec->pod->sandbox_name + "'s sandbox (" + std::to_string(pr.names.size()) +
             " containers), as this pod names them");
    return;
  }
  if (auto why = checkpoint::pod_member_mismatch(*rec->pod, pr.name, gpu_count(c.bundle()))) refuse(*why);
}

checkpoint::RestoreRequest restore_request(Container& c, const std::filesystem::path& checkpoint,
                                           checkpoint::ImagePuller* puller) {
  return {.checkpoint = checkpoint, .image_store = c.config().checkpoint.image_store, .puller = puller};
}

std::string restore_who(Container& c) {
  return "restore of \"" + c.id() + "\": ";
}

}  // namespace

void GpuCheckpointHooks::checkpoint(Container& c, const oci::CheckpointFlags& flags, bool paused) {
  SessionSubject s = subject_of(c);
  if (c.runtime().kind() == oci::RuntimeKind::Runsc) take_pod(s, log_);
  SessionWiring w(s, &flags, false, runner_, log_);
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
  TransferProgram puller(c.config().checkpoint, runner_, log_, restore_who(c));
  auto req = restore_request(c, checkpoint, &puller);
  const auto& pr = c.setup().pod_restore;
  if (!pr) {
    w.session().restore(req);
    return;
  }
  req.cuda_later = true;
  req.pod_member = pr->name;
  if (pr->name.empty()) pods_.begin(pr->sandbox);
  try {
    w.session().restore(req);
  } catch (...) {
    pods_.forget(pr->sandbox);
    throw;
  }
  PodRestoreProgress::Later later;
  if (c.gpu())
    later = [this, held = std::weak_ptr<Container>(c.held()), checkpoint, member = pr->name] {
      auto keep = held.lock();
      if (!keep) return;  // deleted meanwhile: nothing of it to bring back
      SessionWiring cuda(subject_of(*keep), nullptr, true, runner_, log_);
      TransferProgram puller(keep->config().checkpoint, runner_, log_, restore_who(*keep));
      auto again = restore_request(*keep, checkpoint, &puller);
      again.pod_member = member;
      cuda.session().resume_cuda(again);
    };
  const std::string who = "restore of pod sandbox \"" + pr->sandbox + "\": ";
  auto now = pods_.restored(pr->sandbox, pr->names, pr->name, std::move(later));
  if (pr->name.empty() || pods_.count(pr->sandbox) > 0) {
    log_.info(who + (pr->name.empty() ? "its sandbox container" : "container \"" + pr->name + "\"") +
              " restored; the sandbox runs once its containers are (" + std::to_string(pr->names.size()) + " in the image)");
    return;
  }
  log_.info(who + "container \"" + pr->name + "\", the last of " + std::to_string(pr->names.size()) +
            ", restored: the sandbox runs" + (now.empty() ? "" : "; CUDA comes back in its processes"));
  for (auto& f : now) f();
}

void GpuCheckpointHooks::refuse_pod_image_under_runc(const std::string& who, const std::string& reference,
                                                     const std::filesystem::path& into, const ShimConfig& cfg) {
  ScratchDir scratch(into);  // the small image is read here and removed: the container's create pulls it
  TransferProgram puller(cfg.checkpoint, runner_, log_, who);
  std::optional<checkpoint::ImageRecord> rec;
  try {
    rec = checkpoint::read_image_record(puller.fetch_kube(reference, into).checkpoint());
  } catch (const std::exception& e) {
    // Not this check's to refuse: the container's create pulls it again and says why.
    log_.debug(who + "the image " + reference + " could not be read here: " + e.what());
    return;
  }
  if (!rec || !rec->pod) return;
  const std::string why = who + "refused: " + reference + " is a gVisor pod's image (its sandbox with " +
                          std::to_string(rec->pod->names().size()) +
                          " containers), which restores under runsc only, and this pod runs under " + cfg.runtime.binary +
                          ": give the pod the runtime class whose shim runs runsc";
  log_.warn(why);
  throw Error(Code::FailedPrecondition, why);
}

std::filesystem::path GpuCheckpointHooks::fetch_for_restore(Container& c, const std::string& reference,
                                                            const std::filesystem::path& into) {
  const std::string who = "create of container \"" + c.id() + "\" from " + reference + ": ";
  const auto& cfg = c.config().checkpoint;
  TransferProgram puller(cfg, runner_, log_, who);
  checkpoint::KubeCheckpoint image;
  try {
    image = puller.fetch_kube(reference, into);
  } catch (const Error& e) {
    throw Error(e.code(), who + e.what());
  }
  log_.info(who + "the checkpoint image of container " + image.container + " is unpacked in " + image.dir.string());
  if (const auto& pr = c.setup().pod_restore) {
    check_pod_image(c, *pr, image, who, log_);
  } else {
    // What the image's processes were allowed against what this container grants, before any bulk.
    auto mismatches = restore_mismatches(image.spec, image.config, oci::Spec::load(c.bundle()).json());
    if (!mismatches.empty()) {
      std::string text = who + "refused:";
      for (const auto& m : mismatches) text += " " + m + ";";
      text.pop_back();
      log_.warn(text);
      throw Error(Code::FailedPrecondition, text);
    }
  }
  // The record against this host (GPUs, driver, runtime), then the memory into the store.
  SessionWiring w(subject_of(c), nullptr, true, runner_, log_);
  w.session().fetch({.checkpoint = image.checkpoint(), .image_store = cfg.image_store, .puller = &puller});
  return image.dir;
}

}  // namespace nvproxy::shim
