#include "oci/spec.h"

#include "common/error.h"
#include "common/fs.h"

namespace nvproxy::oci {

using nlohmann::json;

namespace {

[[noreturn]] void bad(const std::string& origin, const std::string& field, const std::string& why) {
  throw Error(Code::InvalidArgument, origin + ": " + field + ": " + why);
}

void expect_string_array(const json& j, const std::string& origin, const std::string& field) {
  if (!j.is_array()) bad(origin, field, "must be an array of strings");
  for (const auto& e : j)
    if (!e.is_string()) bad(origin, field, "must be an array of strings");
}

}  // namespace

void validate_process(const json& p, const std::string& origin, const std::string& field) {
  if (!p.is_object()) bad(origin, field, "must be an object");
  if (!p.contains("args") || !p["args"].is_array() || p["args"].empty())
    bad(origin, field + ".args", "must be a non-empty array of strings");
  expect_string_array(p["args"], origin, field + ".args");
  if (p.contains("env")) expect_string_array(p["env"], origin, field + ".env");
  if (p.contains("cwd")) {
    if (!p["cwd"].is_string() || p["cwd"].get<std::string>().empty() || p["cwd"].get<std::string>()[0] != '/')
      bad(origin, field + ".cwd", "must be an absolute path");
  }
  if (p.contains("terminal") && !p["terminal"].is_boolean()) bad(origin, field + ".terminal", "must be a boolean");
  if (p.contains("user") && !p["user"].is_object()) bad(origin, field + ".user", "must be an object");
}

void validate_spec(const json& j, const std::string& origin) {
  if (!j.is_object()) bad(origin, "(top level)", "must be a JSON object");
  if (!j.contains("ociVersion") || !j["ociVersion"].is_string()) bad(origin, "ociVersion", "missing or not a string");
  if (!j.contains("root") || !j["root"].is_object() || !j["root"].contains("path") || !j["root"]["path"].is_string() ||
      j["root"]["path"].get<std::string>().empty())
    bad(origin, "root.path", "missing or not a non-empty string");
  if (j.contains("process")) validate_process(j["process"], origin);
  if (j.contains("mounts")) {
    if (!j["mounts"].is_array()) bad(origin, "mounts", "must be an array");
    size_t i = 0;
    for (const auto& m : j["mounts"]) {
      std::string f = "mounts[" + std::to_string(i++) + "]";
      if (!m.is_object()) bad(origin, f, "must be an object");
      if (!m.contains("destination") || !m["destination"].is_string()) bad(origin, f + ".destination", "missing or not a string");
      if (m.contains("options")) expect_string_array(m["options"], origin, f + ".options");
    }
  }
  if (j.contains("annotations")) {
    if (!j["annotations"].is_object()) bad(origin, "annotations", "must be an object of strings");
    for (const auto& [k, v] : j["annotations"].items())
      if (!v.is_string()) bad(origin, "annotations." + k, "must be a string");
  }
  if (j.contains("linux")) {
    const auto& l = j["linux"];
    if (!l.is_object()) bad(origin, "linux", "must be an object");
    if (l.contains("namespaces")) {
      if (!l["namespaces"].is_array()) bad(origin, "linux.namespaces", "must be an array");
      static const char* kTypes[] = {"pid", "network", "mount", "ipc", "uts", "user", "cgroup", "time"};
      size_t i = 0;
      for (const auto& ns : l["namespaces"]) {
        std::string f = "linux.namespaces[" + std::to_string(i++) + "].type";
        if (!ns.is_object() || !ns.contains("type") || !ns["type"].is_string()) bad(origin, f, "missing or not a string");
        bool known = false;
        for (const char* t : kTypes) known = known || ns["type"] == t;
        if (!known) bad(origin, f, "unknown namespace type \"" + ns["type"].get<std::string>() + "\"");
        if (ns.contains("path") && !ns["path"].is_string())
          bad(origin, "linux.namespaces[" + std::to_string(i - 1) + "].path", "must be a string");
      }
    }
    if (l.contains("devices") && !l["devices"].is_array()) bad(origin, "linux.devices", "must be an array");
    if (l.contains("cgroupsPath") && !l["cgroupsPath"].is_string()) bad(origin, "linux.cgroupsPath", "must be a string");
  }
}

Spec Spec::parse(std::string_view text, const std::string& origin) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for numbers like 1e400
    throw Error(Code::InvalidArgument, origin + ": not valid JSON: " + e.what());
  }
  validate_spec(j, origin);
  return Spec(std::move(j));
}

Spec Spec::load(const std::filesystem::path& bundle) {
  auto p = bundle / "config.json";
  return parse(read_file(p), p.string());
}

void Spec::save(const std::filesystem::path& bundle) const {
  write_file_atomic(bundle / "config.json", j_.dump());
}

std::string Spec::root_path() const {
  return j_["root"]["path"].get<std::string>();
}

bool Spec::terminal() const {
  return j_.contains("process") && j_["process"].value("terminal", false);
}

std::map<std::string, std::string> Spec::annotations() const {
  std::map<std::string, std::string> out;
  if (j_.contains("annotations"))
    for (const auto& [k, v] : j_["annotations"].items()) out[k] = v.get<std::string>();
  return out;
}

std::optional<std::string> Spec::annotation(const std::string& key) const {
  if (j_.contains("annotations") && j_["annotations"].contains(key)) return j_["annotations"][key].get<std::string>();
  return std::nullopt;
}

std::optional<std::string> Spec::env(const std::string& key) const {
  if (!j_.contains("process") || !j_["process"].contains("env")) return std::nullopt;
  std::optional<std::string> found;
  for (const auto& e : j_["process"]["env"]) {
    const auto& s = e.get_ref<const std::string&>();
    if (s.size() > key.size() && s.compare(0, key.size(), key) == 0 && s[key.size()] == '=') found = s.substr(key.size() + 1);
  }
  return found;  // the last definition wins, as in execve's environment
}

bool Spec::own_pid_namespace() const {
  if (!j_.contains("linux") || !j_["linux"].contains("namespaces")) return false;
  for (const auto& ns : j_["linux"]["namespaces"])
    if (ns["type"] == "pid") return !ns.contains("path") || ns["path"].get<std::string>().empty();
  return false;
}

std::string Spec::cgroups_path() const {
  if (j_.contains("linux") && j_["linux"].contains("cgroupsPath")) return j_["linux"]["cgroupsPath"].get<std::string>();
  return "";
}

}  // namespace nvproxy::oci
