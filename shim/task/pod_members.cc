#include "shim/task/pod_members.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/fs.h"
#include "shim/task/checkpoint_wiring.h"

namespace nvproxy::shim {

namespace {

std::string annotation_of(const nlohmann::json& spec, const char* key) {
  auto a = spec.find("annotations");
  if (a == spec.end() || !a->is_object()) return {};
  auto v = a->find(key);
  return v != a->end() && v->is_string() ? v->get<std::string>() : std::string();
}

nlohmann::json spec_of(const std::filesystem::path& bundle) {
  auto spec = nlohmann::json::parse(read_file(bundle / "config.json"), nullptr, false);
  if (spec.is_discarded()) throw Error(Code::InvalidArgument, "the spec " + (bundle / "config.json").string() + " is not JSON");
  return spec;
}

}  // namespace

int gpu_count(const std::filesystem::path& bundle) {
  auto gpus = requested_gpus(bundle);
  if (std::find(gpus.begin(), gpus.end(), "all") != gpus.end()) return checkpoint::kAllGpus;
  return static_cast<int>(gpus.size());
}

std::optional<checkpoint::PodRecord> pod_of(const std::filesystem::path& bundle) {
  const auto own = spec_of(bundle);
  const std::string sandbox = annotation_of(own, "io.kubernetes.cri.sandbox-id");
  if (sandbox.empty() || annotation_of(own, "io.kubernetes.cri.container-type").empty()) return std::nullopt;
  checkpoint::PodRecord pod{.sandbox_id = sandbox, .sandbox_name = annotation_of(own, "io.kubernetes.cri.sandbox-name")};
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(bundle.parent_path(), ec)) {
    if (!e.is_directory(ec) || !std::filesystem::exists(e.path() / "config.json", ec)) continue;
    nlohmann::json spec;
    try {
      spec = spec_of(e.path());
    } catch (const std::exception& x) {
      if (e.path() == bundle) throw;
      continue;  // another pod's bundle being written or removed: not this pod's to judge
    }
    if (annotation_of(spec, "io.kubernetes.cri.sandbox-id") != sandbox) continue;
    const bool is_sandbox = annotation_of(spec, "io.kubernetes.cri.container-type") == "sandbox";
    pod.containers.push_back({.name = is_sandbox ? std::string() : annotation_of(spec, "io.kubernetes.cri.container-name"),
                              .id = e.path().filename().string(),
                              .sandbox = is_sandbox,
                              .image = annotation_of(spec, "io.kubernetes.cri.image-name"),
                              .gpus = is_sandbox ? 0 : gpu_count(e.path())});
    if (is_sandbox && pod.sandbox_name.empty()) pod.sandbox_name = annotation_of(spec, "io.kubernetes.cri.sandbox-name");
  }
  if (ec) throw Error(Code::Internal, "cannot list the pod's bundles in " + bundle.parent_path().string() + ": " + ec.message());
  std::sort(pod.containers.begin(), pod.containers.end(),
            [](const auto& a, const auto& b) { return a.sandbox != b.sandbox ? a.sandbox : a.name < b.name; });
  return pod;
}

}  // namespace nvproxy::shim
