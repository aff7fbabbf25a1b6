#include "shim/task/pod_members.h"

#include <algorithm>

#include "common/error.h"
#include "oci/spec.h"
#include "shim/task/checkpoint_wiring.h"

namespace nvproxy::shim {

int gpu_count(const std::filesystem::path& bundle) {
  auto gpus = requested_gpus(bundle);
  if (std::find(gpus.begin(), gpus.end(), "all") != gpus.end()) return checkpoint::kAllGpus;
  return static_cast<int>(gpus.size());
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

}  // namespace nvproxy::shim
