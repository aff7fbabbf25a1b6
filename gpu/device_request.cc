#include "gpu/device_request.h"

#include <algorithm>
#include <cctype>

#include "common/error.h"
#include "gpu/cdi_spec.h"

namespace nvproxy::gpu {

using nlohmann::json;

const std::set<std::string>& known_capabilities() {
  static const std::set<std::string> kCaps = {"compute", "compat32", "display", "graphics", "ngx", "utility", "video"};
  return kCaps;
}

std::optional<std::string> env_value(const json& spec, const std::string& key) {
  std::optional<std::string> out;
  auto p = spec.find("process");
  if (p == spec.end() || !p->is_object()) return out;
  auto env = p->find("env");
  if (env == p->end() || !env->is_array()) return out;
  for (const auto& e : *env) {
    if (!e.is_string()) continue;
    const auto& s = e.get_ref<const std::string&>();
    if (s.size() > key.size() && s.compare(0, key.size(), key) == 0 && s[key.size()] == '=') out = s.substr(key.size() + 1);
  }
  return out;
}

bool is_cdi_annotation(const std::string& key) {
  auto slash = key.find('/');
  if (slash == std::string::npos || slash + 1 == key.size()) return false;
  std::string prefix = key.substr(0, slash);
  static const std::string kDomain = "cdi.k8s.io";
  return prefix == kDomain || (prefix.size() > kDomain.size() + 1 &&
                               prefix.compare(prefix.size() - kDomain.size() - 1, std::string::npos, "." + kDomain) == 0);
}

namespace {

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(',', start);
    if (end == std::string::npos) end = s.size();
    std::string item = s.substr(start, end - start);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) out.push_back(item);
    start = end + 1;
  }
  return out;
}

void add_unique(std::vector<std::string>& v, const std::string& s) {
  if (std::find(v.begin(), v.end(), s) == v.end()) v.push_back(s);
}

bool is_index(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

bool is_uuid(const std::string& s) {
  return (s.rfind("GPU-", 0) == 0 || s.rfind("MIG-", 0) == 0) && s.size() > 4 && std::all_of(s.begin() + 4, s.end(), [](char c) {
           return std::isxdigit(static_cast<unsigned char>(c)) || c == '-' || c == '/';
         });
}

void parse_visible(const std::string& value, GpuRequest& r) {
  if (value.empty() || value == "void" || value == "none") return;  // toolkit semantics: no GPU device
  for (const auto& item : split_list(value)) {
    if (item == "all")
      r.visible_all = true;
    else if (is_index(item) || is_uuid(item))
      add_unique(r.visible, item);
    else if (parse_qualified_name(item))
      add_unique(r.cdi_names, item);
    else
      throw Error(Code::InvalidArgument, "env NVIDIA_VISIBLE_DEVICES: entry \"" + item +
                                             "\" is not all, none, an index, a GPU-/MIG- UUID or a CDI name");
  }
}

void parse_capabilities(const std::optional<std::string>& value, GpuRequest& r) {
  std::string v = value.value_or("");
  if (v.empty()) v = "utility,compute";  // the toolkit's default
  for (const auto& c : split_list(v)) {
    if (c == "all") {
      r.capabilities.insert(known_capabilities().begin(), known_capabilities().end());
    } else if (known_capabilities().count(c)) {
      r.capabilities.insert(c);
    } else {
      r.warnings.push_back("env NVIDIA_DRIVER_CAPABILITIES: unknown capability \"" + c + "\" ignored");
    }
  }
}

}  // namespace

GpuRequest parse_request(const json& spec) {
  GpuRequest r;
  if (!spec.is_object()) throw Error(Code::InvalidArgument, "config.json: not a JSON object");
  if (auto v = env_value(spec, "NVIDIA_VISIBLE_DEVICES")) parse_visible(*v, r);
  auto ann = spec.find("annotations");
  if (ann != spec.end() && ann->is_object()) {
    for (const auto& [key, val] : ann->items()) {
      if (!is_cdi_annotation(key)) continue;
      if (!val.is_string()) throw Error(Code::InvalidArgument, "config.json: annotations[\"" + key + "\"]: must be a string");
      for (const auto& name : split_list(val.get<std::string>())) {
        if (!parse_qualified_name(name))
          throw Error(Code::InvalidArgument, "config.json: annotations[\"" + key + "\"]: \"" + name +
                                                 "\" is not a fully-qualified CDI device name (vendor.com/class=name)");
        add_unique(r.cdi_names, name);
      }
    }
  }
  r.requested = r.visible_all || !r.visible.empty() || !r.cdi_names.empty();
  parse_capabilities(env_value(spec, "NVIDIA_DRIVER_CAPABILITIES"), r);
  return r;
}

}  // namespace nvproxy::gpu
