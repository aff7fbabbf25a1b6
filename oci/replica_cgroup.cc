#include "oci/replica_cgroup.h"

namespace nvproxy::oci {

std::optional<std::string> replica_cgroups_path(std::string_view path, std::string_view from, std::string_view to) {
  if (from.empty() || to.empty() || from == to || path.size() <= from.size()) return std::nullopt;
  const std::string_view leaf = path.substr(path.size() - from.size());
  const char before = path[path.size() - from.size() - 1];
  // systemd's "slice:prefix:name" ends in its name after a colon; cgroupfs paths after a slash.
  const bool systemd = path.find(':') != std::string_view::npos;
  if (leaf != from || before != (systemd ? ':' : '/')) return std::nullopt;
  return std::string(path.substr(0, path.size() - from.size())) + std::string(to);
}

std::optional<std::string> criu_cgroup_root_line(std::string_view cgroups_path, bool cgroup_v2, bool runc_before_1_2) {
  if (!cgroup_v2 || !runc_before_1_2 || cgroups_path.empty() || cgroups_path.front() != '/' ||
      cgroups_path.find(':') != std::string_view::npos || cgroups_path.find_first_of(" \t\n") != std::string_view::npos)
    return std::nullopt;
  return "cgroup-root " + std::string(cgroups_path);
}

std::optional<std::string> give_replica_its_cgroup(nlohmann::json& spec, const std::string& from, const std::string& to) {
  if (!spec.is_object() || !spec.contains("linux") || !spec["linux"].is_object()) return std::nullopt;
  auto& linux = spec["linux"];
  if (!linux.contains("cgroupsPath") || !linux["cgroupsPath"].is_string()) return std::nullopt;
  const std::string path = linux["cgroupsPath"].get<std::string>();
  auto renamed = replica_cgroups_path(path, from, to);
  if (!renamed) return std::nullopt;
  linux["cgroupsPath"] = *renamed;
  return "the image was taken from container \"" + from + "\": its cgroup " + path + " becomes " + *renamed +
         " for this container, so that replicas restored from one image share no cgroup";
}

}  // namespace nvproxy::oci
