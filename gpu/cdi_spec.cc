#include "gpu/cdi_spec.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <set>

#include "common/error.h"
#include "common/fs.h"

namespace nvproxy::gpu {

using nlohmann::json;

const CdiDevice* CdiSpec::find(const std::string& name) const {
  for (const auto& d : devices)
    if (d.name == name) return &d;
  return nullptr;
}

// ---- names -------------------------------------------------------------------------------------

namespace {
bool alnum(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0;
}
bool alpha(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) != 0;
}

bool valid_part(const std::string& s, const std::string& extra, bool first_alpha) {
  if (s.empty()) return false;
  if (first_alpha ? !alpha(s.front()) : !alnum(s.front())) return false;
  if (!alnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(), [&](char c) { return alnum(c) || extra.find(c) != std::string::npos; });
}
}  // namespace

bool valid_kind(const std::string& kind) {
  auto slash = kind.find('/');
  if (slash == std::string::npos || kind.find('/', slash + 1) != std::string::npos) return false;
  return valid_part(kind.substr(0, slash), "-_.", true) && valid_part(kind.substr(slash + 1), "-_", true);
}

bool valid_device_name(const std::string& name) {
  return valid_part(name, "-_.:", false);
}

bool known_cdi_version(const std::string& v) {
  static const std::set<std::string> kKnown = {"0.1.0", "0.2.0", "0.3.0", "0.4.0", "0.5.0",
                                               "0.6.0", "0.7.0", "0.8.0", "1.0.0", "1.1.0"};
  return kKnown.count(v) != 0;
}

std::optional<QualifiedName> parse_qualified_name(const std::string& s) {
  auto eq = s.find('=');
  if (eq == std::string::npos) return std::nullopt;
  QualifiedName q{s.substr(0, eq), s.substr(eq + 1)};
  if (!valid_kind(q.kind) || !valid_device_name(q.name)) return std::nullopt;
  return q;
}

// ---- YAML -> JSON --------------------------------------------------------------------------------

namespace {

json scalar_to_json(const YAML::Node& n) {
  const std::string& s = n.Scalar();
  if (n.Tag() == "!") return s;  // quoted: always a string
  if (s == "~" || s == "null" || s == "Null" || s == "NULL" || s.empty()) return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  std::string_view v = s;
  bool neg = false;
  if (!v.empty() && (v[0] == '-' || v[0] == '+')) {
    neg = v[0] == '-';
    v.remove_prefix(1);
  }
  int base = 10;
  if (v.size() > 2 && v[0] == '0' && (v[1] == 'x' || v[1] == 'X')) {
    base = 16;
    v.remove_prefix(2);
  } else if (v.size() > 2 && v[0] == '0' && v[1] == 'o') {
    base = 8;
    v.remove_prefix(2);
  } else if (v.size() > 1 && v[0] == '0') {
    base = 8;
    v.remove_prefix(1);
  }  // YAML 1.1 octal (fileMode: 0666)
  int64_t out = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out, base);
  if (!v.empty() && ec == std::errc() && p == v.data() + v.size()) return neg ? -out : out;
  return s;
}

// budget: nodes left to convert. Aliases share nodes, so a small document can expand to
// exponentially many ("billion laughs"); the budget refuses that instead of exhausting memory.
json node_to_json(const YAML::Node& n, std::size_t& budget) {
  if (budget == 0) throw YAML::ParserException(n.Mark(), "the document expands to too many nodes (YAML aliases?)");
  --budget;
  switch (n.Type()) {
    case YAML::NodeType::Sequence: {
      json a = json::array();
      for (const auto& e : n) a.push_back(node_to_json(e, budget));
      return a;
    }
    case YAML::NodeType::Map: {
      json o = json::object();
      for (const auto& kv : n) o[kv.first.as<std::string>()] = node_to_json(kv.second, budget);
      return o;
    }
    case YAML::NodeType::Scalar: return scalar_to_json(n);
    default: return nullptr;
  }
}

}  // namespace

json yaml_to_json(const std::string& text) {
  // Without aliases a document has fewer nodes than bytes; leave room for modest alias use.
  std::size_t budget = 4 * text.size() + 1024;
  return node_to_json(YAML::Load(text), budget);
}

// ---- validation ----------------------------------------------------------------------------------

namespace {

class Checker {
 public:
  explicit Checker(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const std::string& field, const std::string& why) const {
    throw Error(Code::InvalidArgument, "CDI spec " + file_ + ": " + field + ": " + why);
  }
  std::string origin(const std::string& field) const { return file_ + ": " + field; }

  const json* get(const json& obj, const std::string& key) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return nullptr;
    return &*it;
  }
  std::string str(const json& obj, const std::string& key, const std::string& field, bool required) const {
    const json* v = get(obj, key);
    if (!v) {
      if (required) fail(field + key, "required field is missing");
      return "";
    }
    if (!v->is_string()) fail(field + key, "must be a string");
    return v->get<std::string>();
  }
  std::string abs_path(const json& obj, const std::string& key, const std::string& field, bool required) const {
    std::string p = str(obj, key, field, required);
    if (!p.empty() && p[0] != '/') fail(field + key, "\"" + p + "\" is not an absolute path");
    return p;
  }
  std::optional<int64_t> integer(const json& obj, const std::string& key, const std::string& field, int64_t min) const {
    const json* v = get(obj, key);
    if (!v) return std::nullopt;
    if (!v->is_number_integer()) fail(field + key, "must be an integer");
    int64_t i = v->get<int64_t>();
    if (i < min) fail(field + key, "must be >= " + std::to_string(min));
    return i;
  }
  std::vector<std::string> strings(const json& obj, const std::string& key, const std::string& field) const {
    std::vector<std::string> out;
    const json* v = get(obj, key);
    if (!v) return out;
    if (!v->is_array()) fail(field + key, "must be a list of strings");
    for (size_t i = 0; i < v->size(); ++i) {
      if (!(*v)[i].is_string()) fail(field + key + "[" + std::to_string(i) + "]", "must be a string");
      out.push_back((*v)[i].get<std::string>());
    }
    return out;
  }
  const json* list(const json& obj, const std::string& key, const std::string& field) const {
    const json* v = get(obj, key);
    if (v && !v->is_array()) fail(field + key, "must be a list");
    return v;
  }

  ContainerEdits edits(const json& e, const std::string& field) const;

 private:
  DeviceNode node(const json& d, const std::string& f) const;
  MountEdit mount(const json& m, const std::string& f) const;
  HookEdit hook(const json& h, const std::string& f) const;
  std::string file_;
};

DeviceNode Checker::node(const json& d, const std::string& f) const {
  if (!d.is_object()) fail(f, "must be a mapping");
  DeviceNode n;
  n.path = abs_path(d, "path", f + ".", true);
  n.host_path = abs_path(d, "hostPath", f + ".", false);
  n.type = str(d, "type", f + ".", false);
  if (!n.type.empty() && n.type != "c" && n.type != "b" && n.type != "u" && n.type != "p")
    fail(f + ".type", "\"" + n.type + "\" is not one of b, c, u, p");
  n.major = integer(d, "major", f + ".", 0);
  n.minor = integer(d, "minor", f + ".", 0);
  if (auto m = integer(d, "fileMode", f + ".", 0)) {
    if (*m > 07777) fail(f + ".fileMode", "must be a permission mode (<= 07777)");
    n.file_mode = static_cast<uint32_t>(*m);
  }
  if (auto u = integer(d, "uid", f + ".", 0)) n.uid = static_cast<uint32_t>(*u);
  if (auto g = integer(d, "gid", f + ".", 0)) n.gid = static_cast<uint32_t>(*g);
  n.permissions = str(d, "permissions", f + ".", false);
  if (n.permissions.find_first_not_of("rwm") != std::string::npos)
    fail(f + ".permissions", "\"" + n.permissions + "\" may only contain r, w and m");
  n.origin = origin(f);
  return n;
}

MountEdit Checker::mount(const json& m, const std::string& f) const {
  if (!m.is_object()) fail(f, "must be a mapping");
  MountEdit e;
  e.host_path = str(m, "hostPath", f + ".", true);
  if (e.host_path.empty()) fail(f + ".hostPath", "must not be empty");
  e.container_path = abs_path(m, "containerPath", f + ".", true);
  e.type = str(m, "type", f + ".", false);
  e.options = strings(m, "options", f + ".");
  e.origin = origin(f);
  return e;
}

HookEdit Checker::hook(const json& h, const std::string& f) const {
  static const std::set<std::string> kNames = {"createRuntime", "createContainer", "startContainer",
                                               "prestart",      "poststart",       "poststop"};
  if (!h.is_object()) fail(f, "must be a mapping");
  HookEdit e;
  e.hook_name = str(h, "hookName", f + ".", true);
  if (!kNames.count(e.hook_name)) fail(f + ".hookName", "unknown hook \"" + e.hook_name + "\"");
  e.path = abs_path(h, "path", f + ".", true);
  e.args = strings(h, "args", f + ".");
  e.env = strings(h, "env", f + ".");
  e.timeout = integer(h, "timeout", f + ".", 1);
  e.origin = origin(f);
  return e;
}

ContainerEdits Checker::edits(const json& e, const std::string& field) const {
  ContainerEdits out;
  if (!e.is_object()) fail(field, "must be a mapping");
  std::string f = field + ".";
  auto envs = strings(e, "env", f);
  for (size_t i = 0; i < envs.size(); ++i) {
    auto eq = envs[i].find('=');
    std::string where = f + "env[" + std::to_string(i) + "]";
    if (eq == std::string::npos || eq == 0) fail(where, "\"" + envs[i] + "\" is not KEY=VALUE");
    out.env.push_back({envs[i].substr(0, eq), envs[i].substr(eq + 1), origin(where)});
  }
  if (const json* l = list(e, "deviceNodes", f))
    for (size_t i = 0; i < l->size(); ++i)
      out.device_nodes.push_back(node((*l)[i], f + "deviceNodes[" + std::to_string(i) + "]"));
  if (const json* l = list(e, "mounts", f))
    for (size_t i = 0; i < l->size(); ++i) out.mounts.push_back(mount((*l)[i], f + "mounts[" + std::to_string(i) + "]"));
  if (const json* l = list(e, "hooks", f))
    for (size_t i = 0; i < l->size(); ++i) out.hooks.push_back(hook((*l)[i], f + "hooks[" + std::to_string(i) + "]"));
  if (const json* l = list(e, "additionalGids", f))
    for (size_t i = 0; i < l->size(); ++i) {
      const json& g = (*l)[i];
      if (!g.is_number_integer() || g.get<int64_t>() < 0 || g.get<int64_t>() > 0xffffffffLL)
        fail(f + "additionalGids[" + std::to_string(i) + "]", "must be a group id");
      out.additional_gids.push_back(static_cast<uint32_t>(g.get<int64_t>()));
    }
  return out;
}

}  // namespace

CdiSpec parse_cdi_spec(const std::string& text, const std::string& file) {
  Checker c(file);
  json doc;
  try {
    // JSON is YAML, but yaml-cpp rejects some valid JSON (tab indentation): parse .json as JSON.
    bool is_json = file.size() > 5 && file.compare(file.size() - 5, 5, ".json") == 0;
    doc = is_json ? json::parse(text) : yaml_to_json(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for numbers like 1e400
    c.fail("(document)", std::string("not valid JSON: ") + e.what());
  } catch (const YAML::Exception& e) {
    c.fail("line " + std::to_string(e.mark.line + 1) + " column " + std::to_string(e.mark.column + 1),
           "not valid YAML/JSON: " + e.msg);
  }
  if (!doc.is_object()) c.fail("(document)", "must be a mapping with cdiVersion, kind and devices");
  CdiSpec s;
  s.file = file;
  s.version = c.str(doc, "cdiVersion", "", true);
  if (!known_cdi_version(s.version)) c.fail("cdiVersion", "unknown version \"" + s.version + "\"");
  s.kind = c.str(doc, "kind", "", true);
  if (!valid_kind(s.kind)) c.fail("kind", "\"" + s.kind + "\" is not of the form vendor.com/class");
  if (const json* e = c.get(doc, "containerEdits")) s.edits = c.edits(*e, "containerEdits");
  const json* devs = c.list(doc, "devices", "");
  if (!devs || devs->empty()) c.fail("devices", "at least one device is required");
  for (size_t i = 0; i < devs->size(); ++i) {
    std::string f = "devices[" + std::to_string(i) + "]";
    const json& d = (*devs)[i];
    if (!d.is_object()) c.fail(f, "must be a mapping");
    CdiDevice dev;
    dev.field = f;
    dev.name = c.str(d, "name", f + ".", true);
    if (!valid_device_name(dev.name)) c.fail(f + ".name", "invalid device name \"" + dev.name + "\"");
    if (const CdiDevice* prev = s.find(dev.name))
      c.fail(f + ".name", "duplicate device name \"" + dev.name + "\" (also " + prev->field + ")");
    const json* e = c.get(d, "containerEdits");
    if (!e) c.fail(f + ".containerEdits", "required field is missing");
    dev.edits = c.edits(*e, f + ".containerEdits");
    s.devices.push_back(std::move(dev));
  }
  return s;
}

CdiSpec load_cdi_spec(const std::filesystem::path& file) {
  return parse_cdi_spec(read_file(file), file.string());
}

}  // namespace nvproxy::gpu
