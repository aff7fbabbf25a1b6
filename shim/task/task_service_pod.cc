// TaskService's part in a gVisor pod restored whole (pod_restore_annotation.h): the restore its
// sandbox's create notes, its containers' creates, and the end of a pod whose restore failed.
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "checkpoint/image/kube_archive.h"
#include "common/error.h"
#include "shim/task/restore_annotation.h"
#include "shim/task/runsc_root.h"
#include "shim/task/task_service.h"

namespace nvproxy::shim {

namespace {

// How long the end of a pod whose restore failed waits for its containers' exits to be reported,
// so that CRI finds them ended when it stops the pod.
constexpr std::chrono::seconds kPodEndWait{10};

// The pod's container names as a log line lists them.
std::string joined_names(const PodRestoreAsk& ask) {
  std::string names;
  for (const auto& n : ask.names) names += (names.empty() ? "" : ", ") + n;
  return names;
}

// Whether the container's init was reported ended.
bool ended(const Container& c) {
  const ProcStatus s = c.status("");
  return s == ProcStatus::Stopped || s == ProcStatus::Deleted;
}

}  // namespace

void TaskService::take_pod_restore(const oci::Spec& spec, ContainerSetup& s) {
  const std::string sandbox = runsc_sandbox_of(spec, s.id);
  const std::filesystem::path archive = checkpoint::kube_archive_in(s.bundle / kRestoreDir) / "checkpoint";
  if (is_cri_sandbox(spec)) {
    auto ask = pod_restore_annotation(spec, s.id, s.config.checkpoint);
    if (!ask) return;
    s.pod_restore = PodRestoreSetup{.sandbox = sandbox, .name = {}, .names = ask->names};
    s.restore_reference = ask->reference;
    s.checkpoint = archive.string();
    deps_.log.info("create of pod sandbox \"" + s.id + "\": the pod (" + joined_names(*ask) + ") is restored whole from " +
                   ask->reference + ", as its annotations ask");
    std::lock_guard lk(mu_);
    pod_restores_[sandbox] = *ask;
    return;
  }
  std::optional<PodRestoreAsk> ask;
  {
    std::lock_guard lk(mu_);
    if (auto it = pod_restores_.find(sandbox); it != pod_restores_.end()) ask = it->second;
  }
  if (!ask) return;
  const std::string name = container_name_of(spec, s.id);
  if (std::find(ask->names.begin(), ask->names.end(), name) == ask->names.end()) {
    const std::string names = joined_names(*ask);
    const std::string why = "create of container \"" + s.id + "\" (" + name + ") in pod sandbox \"" + sandbox +
                            "\", which is restored whole from " + ask->reference +
                            ": the pod's annotations name its containers " + names +
                            ", and a container the image does not hold cannot start fresh inside a restored sandbox";
    abandon_pod_restore(sandbox, why);
    throw Error(Code::FailedPrecondition, why);
  }
  s.pod_restore = PodRestoreSetup{.sandbox = sandbox, .name = name, .names = ask->names};
  s.restore_reference = ask->reference;
  s.checkpoint = archive.string();
  deps_.log.info("create of container \"" + s.id + "\" (" + name + "): restored with its pod from " + ask->reference);
}

void TaskService::refuse_pod_images_under_runc(const oci::Spec& spec, const ContainerSetup& s) {
  const auto& j = spec.json();
  auto it = j.find("annotations");
  if (it == j.end() || !it->is_object()) return;
  std::vector<std::string> seen;
  for (const auto& [key, value] : it->items()) {
    if (!key.starts_with(kRestoreAnnotationPrefix) || !value.is_string()) continue;
    const std::string ref = value.get<std::string>();
    if (std::find(seen.begin(), seen.end(), ref) != seen.end()) continue;
    seen.push_back(ref);
    const std::string who = "create of pod sandbox \"" + s.id + "\": its annotation " + key + ": ";
    try {
      check_restore_reference(who, ref, s.config.checkpoint);
    } catch (const Error&) {
      continue;  // the container's create refuses it, with the reason
    }
    deps_.checkpoints.refuse_pod_image_under_runc(who, ref, s.bundle / kRestoreDir, s.config);
  }
}

void TaskService::abandon_pod_restore(const std::string& sandbox, const std::string& why) {
  std::shared_ptr<Container> root;
  std::vector<std::shared_ptr<Container>> members;  // the pod's containers this shim serves
  {
    std::lock_guard lk(mu_);
    pod_restores_.erase(sandbox);
    for (const auto& [id, c] : containers_) {
      const auto& pr = c->setup().pod_restore;
      if (id == sandbox)
        root = c;
      else if (pr && pr->sandbox == sandbox)
        members.push_back(c);
    }
  }
  deps_.checkpoints.pod_restore_over(sandbox);
  deps_.log.warn(why + "; the pod's sandbox is ended (nothing of it stays half-restored)");
  if (!root) return;
  end_pod_sandbox(*root);
  // The containers runsc restored into the sandbox hold no process of their own (runsc answers
  // their kill with "no such process with PID 0") and their pid is the sandbox's, whose exit is
  // the sandbox container's: a kill has their end watched through runsc (InitProcess::run_kill),
  // which reports it once the sandbox is gone. Until then CRI could stop the pod only by waiting
  // for exits that never came, and their output pipes, which the sandbox held, stayed open.
  for (const auto& c : members) {
    if (ended(*c) || c->status("") == ProcStatus::Created) continue;  // a created one is removed as it is
    try {
      c->kill("", SIGKILL, true);
    } catch (const std::exception& e) {
      deps_.log.debug("pod sandbox \"" + sandbox + "\": container \"" + c->id() + "\": " + e.what());
    }
  }
  members.push_back(root);
  const auto until = std::chrono::steady_clock::now() + kPodEndWait;
  for (const auto& c : members) {
    while (!ended(*c) && c->status("") != ProcStatus::Created && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (!ended(*c) && c->status("") != ProcStatus::Created)
      deps_.log.warn("pod sandbox \"" + sandbox + "\": container \"" + c->id() + "\" not reported ended " +
                     std::to_string(kPodEndWait.count()) + " s after its pod's restore was abandoned");
  }
}

void TaskService::end_pod_sandbox(Container& root) {
  const std::string who = "pod sandbox \"" + root.id() + "\": ";
  try {
    root.kill("", SIGKILL, true);
  } catch (const std::exception& e) {
    deps_.log.debug(who + "kill: " + e.what());
  }
  // runsc cannot signal a sandbox whose restore failed after its root container was restored
  // (none of the root's processes runs: "no such process"), so the sandbox's process, the root
  // container's init (runsc's pid file names it), is killed itself. It is this shim's child
  // until its exit is reported, so the pid is still the sandbox's.
  const pid_t pid = root.init_pid();
  if (pid <= 0 || ended(root)) return;
  if (::kill(pid, SIGKILL) < 0 && errno != ESRCH)
    deps_.log.warn(who + "cannot kill its sandbox process (pid " + std::to_string(pid) + "): " + std::strerror(errno));
  else
    deps_.log.info(who + "killed its sandbox process (pid " + std::to_string(pid) + ")");
}

void TaskService::end_failed_pod_restore(Container& c, const std::string& why) {
  const auto& pr = c.setup().pod_restore;
  if (!pr || pr->name.empty()) return;  // the sandbox container's own: RunPodSandbox fails and CRI removes it
  abandon_pod_restore(pr->sandbox, "restore of container \"" + c.id() + "\" (" + pr->name + ") of pod sandbox \"" + pr->sandbox +
                                       "\" failed: " + why);
}

void TaskService::warn_pod_sandbox_without_nvproxy(const oci::Spec& spec, const ContainerSetup& s) {
  constexpr const char* kRunscNvproxy = "dev.gvisor.internal.nvproxy";  // runsc's own switch, from the pod
  if (s.config.gpu.nvproxy != "auto" || spec.annotation("io.kubernetes.cri.container-type").value_or("") != "container") return;
  const std::string sandbox = runsc_sandbox_of(spec, s.id);
  std::shared_ptr<Container> root;
  {
    std::lock_guard lk(mu_);
    if (auto it = containers_.find(sandbox); it != containers_.end()) root = it->second;
  }
  if (!root) return;                      // not served here: its flags are unknown
  if (root->setup().pod_restore) return;  // restored: its image decides (pod_restore_nvproxy.h)
  const auto& flags = root->setup().runtime_global;
  if (std::find(flags.begin(), flags.end(), "--nvproxy") != flags.end()) return;
  try {
    if (oci::Spec::load(root->bundle()).annotation(kRunscNvproxy).value_or("") == "true") return;
  } catch (const std::exception&) {
    // unreadable: said as without
  }
  deps_.log.warn("container \"" + s.id + "\" asks for a GPU, but its pod's sandbox \"" + sandbox +
                 "\" was booted without nvproxy (gpu.nvproxy: auto, and the sandbox container asks for no GPU); runsc sets "
                 "nvproxy up only when it boots a sandbox, so this container will not reach the GPU: give GPU pods a "
                 "runtime class whose shim config says gpu.nvproxy: on, or the pod the annotation " +
                 kRunscNvproxy + ": \"true\" passed by pod_annotations (docs/install.md)");
}

}  // namespace nvproxy::shim
