#include "shim/task/restore_annotation.h"

#include <algorithm>
#include <regex>

#include "common/error.h"

namespace nvproxy::shim {

using json = nlohmann::json;

namespace {

// "host:5000/ckpt/llm@sha256:<64 hex>"; the repository has a host part (a dot, a colon or
// "localhost" before the first slash), as a registry reference does and a path does not.
bool pinned_registry_image(const std::string& ref) {
  static const std::regex pinned(R"(^[a-z0-9.-]+(:[0-9]+)?/[a-z0-9._/-]+@sha256:[0-9a-f]{64}$)");
  if (!std::regex_match(ref, pinned)) return false;
  const std::string host = ref.substr(0, ref.find('/'));
  return host.find('.') != std::string::npos || host.find(':') != std::string::npos || host == "localhost";
}

// `repo` is `prefix` or below it ("host:5000/ckpt" allows "host:5000/ckpt/llm", not "host:5000/ckptx").
bool allowed_by(const std::string& repo, std::string prefix) {
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  return !prefix.empty() && (repo == prefix || repo.starts_with(prefix + "/"));
}

const json* at(const json& j, std::initializer_list<const char*> path) {
  const json* cur = &j;
  for (const char* k : path) {
    if (!cur->is_object()) return nullptr;
    auto it = cur->find(k);
    if (it == cur->end()) return nullptr;
    cur = &*it;
  }
  return cur;
}

std::vector<std::string> strings_at(const json& j, std::initializer_list<const char*> path) {
  std::vector<std::string> out;
  if (const json* a = at(j, path); a && a->is_array())
    for (const auto& v : *a)
      if (v.is_string()) out.push_back(v.get<std::string>());
  return out;
}

// The namespace of `type` in the spec: nullptr when it has none; its "path" when it joins one.
const json* namespace_of(const json& spec, const std::string& type) {
  const json* nss = at(spec, {"linux", "namespaces"});
  if (!nss || !nss->is_array()) return nullptr;
  for (const auto& ns : *nss)
    if (ns.is_object() && ns.value("type", "") == type) return &ns;
  return nullptr;
}

std::string annotation_of(const json& spec, const char* key) {
  const json* v = at(spec, {"annotations", key});
  return v && v->is_string() ? v->get<std::string>() : std::string();
}

}  // namespace

std::string container_name_of(const oci::Spec& spec, const std::string& id) {
  for (const char* key : {"io.kubernetes.cri.container-name", "nerdctl/name"})
    if (auto v = spec.annotation(key); v && !v->empty()) return *v;
  return id;
}

void check_restore_reference(const std::string& who, const std::string& reference, const checkpoint::CheckpointConfig& cfg) {
  auto refuse = [&](const std::string& why) { throw Error(Code::FailedPrecondition, who + why); };
  if (!cfg.annotation_restore)
    refuse("and this node's shim does not restore by annotation (checkpoint.annotation_restore is off)");
  if (cfg.image_store.empty())
    refuse("which needs the shim's image store (checkpoint.image_store), and it is not configured here");
  if (!reference.empty() && (reference.front() == '/' || reference.front() == '.'))
    refuse("but an annotation may name a registry's image only, never a host path");
  if (!pinned_registry_image(reference))
    refuse("but an annotation may name only a registry's image pinned by digest (host[:port]/repo@sha256:<64 hex>)");
  const std::string repo = reference.substr(0, reference.find('@'));
  if (std::none_of(cfg.annotation_registries.begin(), cfg.annotation_registries.end(),
                   [&](const std::string& p) { return allowed_by(repo, p); }))
    refuse("but the repository " + repo + " is not in checkpoint.annotation_registries");
}

std::optional<AnnotationRestore> restore_annotation(const oci::Spec& spec, const std::string& id,
                                                    const checkpoint::CheckpointConfig& cfg) {
  AnnotationRestore r{.name = container_name_of(spec, id), .reference = {}};
  const std::string key = kRestoreAnnotationPrefix + r.name;
  auto value = spec.annotation(key);
  if (!value) return std::nullopt;
  r.reference = *value;
  check_restore_reference(
      "create of container \"" + id + "\": its annotation " + key + "=\"" + r.reference + "\" asks for a restore, ", r.reference,
      cfg);
  return r;
}

std::vector<std::string> restore_mismatches(const json& checkpointed, const json& config_dump, const json& spec) {
  std::vector<std::string> out;
  // Capabilities: the restored processes keep the sets they were checkpointed with.
  std::vector<std::pair<std::string, std::string>> beyond;  // capability, the sets it is missing from
  for (const char* set : {"bounding", "effective", "permitted"}) {
    const auto grants = strings_at(spec, {"process", "capabilities", set});
    for (const auto& c : strings_at(checkpointed, {"process", "capabilities", set})) {
      if (std::find(grants.begin(), grants.end(), c) != grants.end()) continue;
      auto it = std::find_if(beyond.begin(), beyond.end(), [&c](const auto& b) { return b.first == c; });
      if (it == beyond.end())
        beyond.emplace_back(c, set);
      else
        it->second += std::string(", ") + set;
    }
  }
  if (!beyond.empty()) {
    std::string list;
    for (const auto& [cap, sets] : beyond) list += (list.empty() ? "" : ", ") + cap + " (" + sets + ")";
    out.push_back("the checkpointed processes held " + list + ", which this container's spec does not grant");
  }
  // The user namespace: the processes' ids mean what they meant only under the same mappings.
  const json* had_user = namespace_of(checkpointed, "user");
  const json* user = namespace_of(spec, "user");
  if (static_cast<bool>(had_user) != static_cast<bool>(user))
    out.push_back(std::string("the checkpointed container ran ") + (had_user ? "in" : "without") +
                  " a user namespace and this one runs " + (user ? "in one" : "without one"));
  else if (had_user)
    for (const char* m : {"uidMappings", "gidMappings"}) {
      const json* a = at(checkpointed, {"linux", m});
      const json* b = at(spec, {"linux", m});
      if ((a ? *a : json()) != (b ? *b : json()))
        out.push_back(std::string("the user namespace's ") + m + " differ from the checkpointed container's");
    }
  if (const json* pid = namespace_of(spec, "pid");
      pid && pid->contains("path") && (*pid)["path"].is_string() && !(*pid)["path"].get<std::string>().empty())
    out.push_back("this container joins another's PID namespace (" + (*pid)["path"].get<std::string>() +
                  ", a pod sharing its process namespace): CRIU restores a process tree only into a PID namespace of its own");
  // Mounts: CRIU puts each of the image's mounts back at its destination in the new container.
  std::vector<std::string> dests;
  if (const json* ms = at(spec, {"mounts"}); ms && ms->is_array())
    for (const auto& m : *ms)
      if (m.is_object()) dests.push_back(m.value("destination", ""));
  std::string lacking;
  if (const json* ms = at(checkpointed, {"mounts"}); ms && ms->is_array())
    for (const auto& m : *ms)
      if (m.is_object()) {
        const std::string d = m.value("destination", "");
        if (!d.empty() && std::find(dests.begin(), dests.end(), d) == dests.end()) lacking += (lacking.empty() ? "" : ", ") + d;
      }
  if (!lacking.empty())
    out.push_back("the checkpointed container had mounts at " + lacking +
                  " that this container's spec does not: CRIU puts every mount back at its destination");
  // The image: CRIU restores the processes onto the files they were checkpointed on.
  std::string had_image = config_dump.is_object() ? config_dump.value("rootfsImageName", "") : "";
  if (had_image.empty()) had_image = annotation_of(checkpointed, "io.kubernetes.cri.image-name");
  const std::string image = annotation_of(spec, "io.kubernetes.cri.image-name");
  if (!had_image.empty() && !image.empty() && had_image != image)
    out.push_back("the container was checkpointed from the image " + had_image + " and this one is created from " + image);
  return out;
}

}  // namespace nvproxy::shim
