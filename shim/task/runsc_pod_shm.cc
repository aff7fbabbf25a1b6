#include "shim/task/runsc_pod_shm.h"

#include <algorithm>

#include "oci/shadowed_mounts.h"

namespace nvproxy::shim {

namespace {

using nlohmann::json;

constexpr const char* kShm = "/dev/shm";
constexpr const char* kHintPrefix = "dev.gvisor.spec.mount.";

std::string string_at(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool is_bind(const json& m) {
  if (string_at(m, "type") == "bind") return true;
  auto it = m.find("options");
  return it != m.end() && it->is_array() &&
         std::any_of(it->begin(), it->end(), [](const json& o) { return o == "bind" || o == "rbind"; });
}

// A mount hint of the spec's own (any name) for `source`: the spec's author decided.
bool hinted(const json& annotations, const std::string& source) {
  for (const auto& [key, value] : annotations.items())
    if (key.starts_with(kHintPrefix) && key.ends_with(".source") && value == source) return true;
  return false;
}

}  // namespace

std::optional<std::string> share_pod_shm_in_sandbox(json& spec) {
  if (!spec.is_object()) return std::nullopt;
  auto ann = spec.find("annotations");
  if (ann == spec.end() || !ann->is_object()) return std::nullopt;
  const std::string type = string_at(*ann, "io.kubernetes.cri.container-type");
  if (type != "sandbox" && type != "container") return std::nullopt;
  auto mounts = spec.find("mounts");
  if (mounts == spec.end() || !mounts->is_array()) return std::nullopt;
  // The last mount at /dev/shm is the one the container sees.
  json* shm = nullptr;
  for (auto& m : *mounts)
    if (m.is_object() && oci::normalize_destination(string_at(m, "destination")) == kShm) shm = &m;
  if (!shm || !is_bind(*shm)) return std::nullopt;
  const std::string source = string_at(*shm, "source");
  if (source.empty() || source.front() != '/' || oci::normalize_destination(source) == kShm) return std::nullopt;
  if (hinted(*ann, source)) return std::nullopt;

  (*shm)["type"] = "tmpfs";
  if (auto opts = shm->find("options"); opts != shm->end() && opts->is_array()) {
    json kept = json::array();
    for (const auto& o : *opts)
      if (o != "bind" && o != "rbind") kept.push_back(o);
    *opts = std::move(kept);
  }
  if (type == "container") return "/dev/shm (" + source + ") mounted as the pod's tmpfs inside the sandbox";
  const std::string hint = std::string(kHintPrefix) + kRunscPodShmHint;
  (*ann)[hint + ".source"] = source;
  (*ann)[hint + ".type"] = "tmpfs";
  (*ann)[hint + ".share"] = "pod";
  // The hint is the pod's one tmpfs; each container mounts it with its own options (read-only in
  // the sandbox container), which runsc checks against these.
  (*ann)[hint + ".options"] = "rw";
  return "/dev/shm (" + source + ") is a tmpfs inside the sandbox, shared by the pod's containers (runsc's mount hint " + hint +
         "), so that runsc's checkpoint saves it";
}

}  // namespace nvproxy::shim
