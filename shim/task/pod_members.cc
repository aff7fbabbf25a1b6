#include "shim/task/pod_members.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "oci/spec.h"
#include "shim/task/checkpoint_wiring.h"

namespace nvproxy::shim {

int gpu_count(const std::filesystem::path& bundle) {
  auto gpus = requested_gpus(bundle);
  if (std::find(gpus.begin(), gpus.end(), "all") != gpus.end()) return checkpoint::kAllGpus;
  return static_cast<int>(gpus.size());
}

bool joins_pod_pid_namespace(const std::filesystem::path& bundle) {
  try {
    const auto spec = oci::Spec::load(bundle);
    const auto& ns = spec.json().value("/linux/namespaces"_json_pointer, nlohmann::json::array());
    return std::any_of(ns.begin(), ns.end(), [](const nlohmann::json& n) {
      return n.is_object() && n.value("type", "") == "pid" && !n.value("path", "").empty();
    });
  } catch (const std::exception&) {
    return false;
  }
}

std::optional<checkpoint::PodRecord> pod_of(const std::filesystem::path& bundle) {
  // An annotation of a spec, "" where it has none.
  auto annotation = [](const oci::Spec& spec, const char* key) { return spec.annotation(key).value_or(""); };
  const auto own = oci::Spec::load(bundle);
  const std::string sandbox = annotation(own, "io.kubernetes.cri.sandbox-id");
  if (sandbox.empty() || annotation(own, "io.kubernetes.cri.container-type").empty()) return std::nullopt;
  checkpoint::PodRecord pod{.sandbox_id = sandbox, .sandbox_name = annotation(own, "io.kubernetes.cri.sandbox-name")};
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(bundle.parent_path(), ec)) {
    if (!e.is_directory(ec) || !std::filesystem::exists(e.path() / "config.json", ec)) continue;
    std::optional<oci::Spec> spec;
    try {
      spec = oci::Spec::load(e.path());
    } catch (const std::exception&) {
      if (e.path() == bundle) throw;
      continue;  // another pod's bundle being written or removed: not this pod's to judge
    }
    if (annotation(*spec, "io.kubernetes.cri.sandbox-id") != sandbox) continue;
    const bool is_sandbox = annotation(*spec, "io.kubernetes.cri.container-type") == "sandbox";
    pod.containers.push_back({.name = is_sandbox ? std::string() : annotation(*spec, "io.kubernetes.cri.container-name"),
                              .id = e.path().filename().string(),
                              .sandbox = is_sandbox,
                              .image = annotation(*spec, "io.kubernetes.cri.image-name"),
                              .gpus = is_sandbox ? 0 : gpu_count(e.path())});
    if (is_sandbox && pod.sandbox_name.empty()) pod.sandbox_name = annotation(*spec, "io.kubernetes.cri.sandbox-name");
  }
  if (ec) throw Error(Code::Internal, "cannot list the pod's bundles in " + bundle.parent_path().string() + ": " + ec.message());
  std::sort(pod.containers.begin(), pod.containers.end(),
            [](const auto& a, const auto& b) { return a.sandbox != b.sandbox ? a.sandbox : a.name < b.name; });
  return pod;
}

std::vector<std::string> leave_out_ended(checkpoint::PodRecord& pod, oci::Runtime& runtime, const std::string& named, Logger& log,
                                         const std::string& who) {
  std::vector<std::string> ended;
  for (auto it = pod.containers.begin(); it != pod.containers.end();) {
    std::string status;
    try {
      status = it->sandbox ? "" : runtime.state(it->id).status;
    } catch (const std::exception&) {
      // Not the runtime's to answer (being created or removed): left as it is, as before.
    }
    if (status != "stopped") {
      ++it;
      continue;
    }
    if (it->id == named)
      throw Error(Code::FailedPrecondition, who +
                                                " refused: the container has ended; a gVisor pod is checkpointed whole "
                                                "through any of its running containers");
    try {
      runtime.remove(it->id, false);
    } catch (const std::exception& e) {
      throw Error(Code::FailedPrecondition,
                  who + " refused: the pod's container \"" + it->name + "\" (" + it->id +
                      ") has ended, and runsc's image of the sandbox would hold it (its restore would wait for it and "
                      "fail on it), but it could not be deleted from the sandbox: " +
                      e.what() + "; delete it (crictl rm) and checkpoint again; nothing was toggled, the pod runs on");
    }
    log.info(who + ": the pod's container \"" + it->name + "\" (" + it->id +
             ") had ended (an init container?): deleted from the sandbox (runsc delete) and left out of the image, "
             "whose restore neither needs it nor waits for it");
    ended.push_back(it->name);
    it = pod.containers.erase(it);
  }
  return ended;
}

}  // namespace nvproxy::shim
