#include "gpu/record.h"

#include <algorithm>
#include <filesystem>

#include "common/error.h"

namespace nvproxy::gpu {

using nlohmann::json;

json make_record(const std::string& mode, const std::vector<std::string>& devices, const GpuRequest& req,
                 const ContainerEdits& edits, bool with_hook) {
  json r = {{"version", 1}, {"mode", mode}, {"devices", devices}};
  r["request"] = {{"visibleAll", req.visible_all},
                  {"visible", req.visible},
                  {"cdi", req.cdi_names},
                  {"capabilities", json(std::vector<std::string>(req.capabilities.begin(), req.capabilities.end()))}};
  json nodes = json::array();
  for (const auto& n : edits.device_nodes) {
    json j = {{"path", n.path}, {"hostPath", n.host_path.empty() ? n.path : n.host_path}, {"type", n.type}};
    if (n.major) j["major"] = *n.major;
    if (n.minor) j["minor"] = *n.minor;
    nodes.push_back(j);
  }
  r["nodes"] = nodes;
  json mounts = json::array();
  std::vector<std::string> ld_dirs;
  for (const auto& m : edits.mounts) {
    mounts.push_back({{"source", m.host_path}, {"destination", m.container_path}});
    std::filesystem::path d(m.container_path);
    if (d.filename().string().find(".so") == std::string::npos) continue;
    std::string dir = d.parent_path().string();
    if (std::find(ld_dirs.begin(), ld_dirs.end(), dir) == ld_dirs.end()) ld_dirs.push_back(dir);
  }
  r["mounts"] = mounts;
  json links = json::array();
  for (const auto& s : edits.symlinks) links.push_back({{"path", s.path}, {"target", s.target}});
  r["symlinks"] = links;
  r["ldDirs"] = ld_dirs;
  if (with_hook) r["hook"] = kHookName;
  return r;
}

std::optional<json> read_record_annotations(const json& annotations) {
  if (!annotations.is_object()) return std::nullopt;
  auto it = annotations.find(kRecordAnnotation);
  if (it == annotations.end()) return std::nullopt;
  std::string where = std::string("annotations[\"") + kRecordAnnotation + "\"]";
  if (!it->is_string()) throw Error(Code::InvalidArgument, where + ": must be a string");
  try {
    json r = json::parse(it->get<std::string>());
    if (!r.is_object()) throw Error(Code::InvalidArgument, where + ": must hold a JSON object");
    return r;
  } catch (const json::exception& e) {
    throw Error(Code::InvalidArgument, where + ": not valid JSON: " + e.what());
  }
}

std::optional<json> read_record(const json& spec) {
  if (!spec.is_object() || !spec.contains("annotations")) return std::nullopt;
  return read_record_annotations(spec["annotations"]);
}

GpuRequest request_from_record(const json& record) {
  GpuRequest r;
  try {
    const json& q = record.at("request");
    r.visible_all = q.value("visibleAll", false);
    r.visible = q.value("visible", std::vector<std::string>{});
    r.cdi_names = q.value("cdi", std::vector<std::string>{});
    for (const auto& c : q.value("capabilities", std::vector<std::string>{})) r.capabilities.insert(c);
  } catch (const json::exception& e) {
    throw Error(Code::InvalidArgument, std::string("annotations[\"") + kRecordAnnotation + "\"].request: " + e.what());
  }
  r.requested = r.visible_all || !r.visible.empty() || !r.cdi_names.empty();
  return r;
}

}  // namespace nvproxy::gpu
