#include "gpu/device_request.h"

#include <algorithm>
#include <cctype>
#include <string_view>
#include <unordered_set>

#include "common/error.h"
#include "common/number.h"
#include "common/text.h"
#include "gpu/cdi_spec.h"

namespace nvproxy::gpu {

using nlohmann::json;

const std::set<std::string>& known_capabilities() {
  static const std::set<std::string> kCaps = {"compute", "compat32", "display", "graphics", "ngx", "utility", "video"};
  return kCaps;
}

namespace {

// The value of KEY in process.env (the last one wins, as in execve), a view into `spec`.
std::optional<std::string_view> env_view(const json& spec, std::string_view key) {
  std::optional<std::string_view> out;
  auto p = spec.find("process");
  if (p == spec.end() || !p->is_object()) return out;
  auto env = p->find("env");
  if (env == p->end() || !env->is_array()) return out;
  for (const auto& e : *env) {
    if (!e.is_string()) continue;
    std::string_view s = e.get_ref<const std::string&>();
    if (s.size() > key.size() && s.starts_with(key) && s[key.size()] == '=') out = s.substr(key.size() + 1);
  }
  return out;
}

}  // namespace

std::optional<std::string> env_value(const json& spec, const std::string& key) {
  auto v = env_view(spec, key);
  return v ? std::optional<std::string>(std::string(*v)) : std::nullopt;
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

// The items of a comma-separated list, blanks around each trimmed, empty ones dropped. Linear.
std::vector<std::string_view> split_list(std::string_view s) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(',', start);
    if (end == std::string_view::npos) end = s.size();
    std::string_view item = s.substr(start, end - start);
    const size_t first = item.find_first_not_of(" \t");
    if (first != std::string_view::npos) {
      item = item.substr(first, item.find_last_not_of(" \t") - first + 1);
      out.push_back(item);
    }
    start = end + 1;
  }
  return out;
}

// The distinct devices of one request, in the order first asked for: a hash set beside each list,
// so that N entries cost N lookups (the linear search it replaces made 150k entries 27 s).
class Devices {
 public:
  Devices(GpuRequest& r, const RequestLimits& limits) : r_(r), limits_(limits) {}

  void add_visible(std::string_view s, const std::string& field) { add(r_.visible, s, field); }
  void add_cdi(std::string_view s, const std::string& field) { add(r_.cdi_names, s, field); }

 private:
  void add(std::vector<std::string>& v, std::string_view s, const std::string& field) {
    if (!seen_.emplace(s).second) return;
    check_bound(field, seen_.size(), limits_.max_devices, "devices");
    v.emplace_back(s);
  }

  GpuRequest& r_;
  const RequestLimits& limits_;
  std::unordered_set<std::string_view> seen_;  // views into the spec's strings, which outlive this
};

bool is_index(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

bool is_uuid(std::string_view s) {
  return (s.starts_with("GPU-") || s.starts_with("MIG-")) && s.size() > 4 && std::all_of(s.begin() + 4, s.end(), [](char c) {
           return std::isxdigit(static_cast<unsigned char>(c)) || c == '-' || c == '/';
         });
}

constexpr const char* kVisibleField = "env NVIDIA_VISIBLE_DEVICES";

void parse_visible(std::string_view value, Devices& devices, GpuRequest& r, const RequestLimits& limits) {
  if (value.empty() || value == "void" || value == "none") return;  // toolkit semantics: no GPU device
  check_bound(kVisibleField, value.size(), limits.max_value_bytes);
  for (const auto item : split_list(value)) {
    if (item == "all")
      r.visible_all = true;
    else if (is_index(item)) {
      if (!parse_number<unsigned>(item))
        throw Error(Code::InvalidArgument, std::string(kVisibleField) + ": GPU index " + quote_value(item) + " is out of range");
      devices.add_visible(item, kVisibleField);
    } else if (is_uuid(item))
      devices.add_visible(item, kVisibleField);
    else if (parse_qualified_name(std::string(item)))
      devices.add_cdi(item, kVisibleField);
    else
      throw Error(Code::InvalidArgument, std::string(kVisibleField) + ": entry " + quote_value(item) +
                                             " is not all, none, an index, a GPU-/MIG- UUID or a CDI name");
  }
}

void parse_capabilities(const std::optional<std::string_view>& value, GpuRequest& r, const RequestLimits& limits) {
  std::string_view v = value.value_or("");
  if (v.empty()) v = "utility,compute";  // the toolkit's default
  check_bound("env NVIDIA_DRIVER_CAPABILITIES", v.size(), limits.max_value_bytes);
  std::size_t unknown = 0;
  for (const auto c : split_list(v)) {
    if (c == "all") {
      r.capabilities.insert(known_capabilities().begin(), known_capabilities().end());
    } else if (known_capabilities().count(std::string(c))) {
      r.capabilities.insert(std::string(c));
    } else if (++unknown <= 8) {  // a warning each for the first few, not one per entry of a huge list
      r.warnings.push_back("env NVIDIA_DRIVER_CAPABILITIES: unknown capability " + quote_value(c) + " ignored");
    }
  }
  if (unknown > 8)
    r.warnings.push_back("env NVIDIA_DRIVER_CAPABILITIES: " + std::to_string(unknown - 8) + " more unknown capabilities ignored");
}

}  // namespace

GpuRequest parse_request(const json& spec, const RequestLimits& limits) {
  GpuRequest r;
  if (!spec.is_object()) throw Error(Code::InvalidArgument, "config.json: not a JSON object");
  Devices devices(r, limits);
  if (auto v = env_view(spec, "NVIDIA_VISIBLE_DEVICES")) parse_visible(*v, devices, r, limits);
  auto ann = spec.find("annotations");
  if (ann != spec.end() && ann->is_object()) {
    std::size_t cdi_annotations = 0;
    for (const auto& [key, val] : ann->items()) {
      if (!is_cdi_annotation(key)) continue;
      check_bound("config.json: annotations: CDI annotations", ++cdi_annotations, limits.max_cdi_annotations, "annotations");
      const std::string field = "config.json: annotations[" + quote_value(key) + "]";
      if (!val.is_string()) throw Error(Code::InvalidArgument, field + ": must be a string");
      const std::string_view value = val.get_ref<const std::string&>();
      check_bound(field, value.size(), limits.max_value_bytes);
      for (const auto name : split_list(value)) {
        if (!parse_qualified_name(std::string(name)))
          throw Error(Code::InvalidArgument,
                      field + ": " + quote_value(name) + " is not a fully-qualified CDI device name (vendor.com/class=name)");
        devices.add_cdi(name, field);
      }
    }
  }
  r.requested = r.visible_all || !r.visible.empty() || !r.cdi_names.empty();
  parse_capabilities(env_view(spec, "NVIDIA_DRIVER_CAPABILITIES"), r, limits);
  return r;
}

}  // namespace nvproxy::gpu
