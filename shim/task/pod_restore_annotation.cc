#include "shim/task/pod_restore_annotation.h"

#include <algorithm>

#include "common/error.h"
#include "shim/task/restore_annotation.h"

namespace nvproxy::shim {

bool is_cri_sandbox(const oci::Spec& spec) {
  return spec.annotation("io.kubernetes.cri.container-type").value_or("") == "sandbox";
}

std::optional<PodRestoreAsk> pod_restore_annotation(const oci::Spec& spec, const std::string& id,
                                                    const checkpoint::CheckpointConfig& cfg) {
  const auto& j = spec.json();
  auto it = j.find("annotations");
  if (it == j.end() || !it->is_object()) return std::nullopt;
  const std::string prefix = kRestoreAnnotationPrefix;
  PodRestoreAsk ask;
  std::string first_key;
  for (const auto& [key, value] : it->items()) {
    if (!key.starts_with(prefix) || key.size() == prefix.size()) continue;
    const std::string ref = value.is_string() ? value.get<std::string>() : value.dump();
    if (first_key.empty()) {
      first_key = key;
      ask.reference = ref;
    } else if (ref != ask.reference) {
      throw Error(Code::FailedPrecondition, "create of pod sandbox \"" + id + "\": its annotations " + first_key + "=\"" +
                                                ask.reference + "\" and " + key + "=\"" + ref +
                                                "\" name different images, and a gVisor pod is restored whole from one "
                                                "image of its sandbox (every annotation of the pod names the same image)");
    }
    ask.names.push_back(key.substr(prefix.size()));
  }
  if (first_key.empty()) return std::nullopt;
  std::sort(ask.names.begin(), ask.names.end());
  check_restore_reference("create of pod sandbox \"" + id + "\": its annotation " + first_key + "=\"" + ask.reference +
                              "\" asks for the pod's restore, ",
                          ask.reference, cfg);
  return ask;
}

}  // namespace nvproxy::shim
