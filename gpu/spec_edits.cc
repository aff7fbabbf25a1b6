#include "gpu/spec_edits.h"

#include <algorithm>

#include "common/error.h"

namespace nvproxy::gpu {

using nlohmann::json;

namespace {

// obj[key] as a container of `type`, created when absent; names the field when it is something else.
json& child(json& obj, const std::string& key, json::value_t type, const std::string& field) {
  if (!obj.contains(key) || obj[key].is_null()) obj[key] = type == json::value_t::array ? json::array() : json::object();
  json& c = obj[key];
  if (c.type() != type)
    throw Error(Code::InvalidArgument,
                "config.json: " + field + ": must be " + (type == json::value_t::array ? "an array" : "an object"));
  return c;
}

bool same_num(const json& j, const char* key, int64_t v) {
  auto it = j.find(key);
  return it != j.end() && it->is_number_integer() && it->get<int64_t>() == v;
}

size_t apply_env(json& spec, const std::vector<EnvEdit>& env) {
  size_t added = 0;
  if (env.empty()) return 0;
  json& list = child(child(spec, "process", json::value_t::object, "process"), "env", json::value_t::array, "process.env");
  for (const auto& e : env) {
    std::string kv = e.key + "=" + e.value;
    bool done = false;
    for (auto& x : list) {
      if (!x.is_string()) continue;
      const std::string& s = x.get_ref<const std::string&>();
      if (s.compare(0, e.key.size() + 1, e.key + "=") != 0) continue;
      if (s != kv) {
        x = kv;
        ++added;
      }  // CDI env overrides, as containerd's CDI injection does
      done = true;
    }
    if (!done) {
      list.push_back(kv);
      ++added;
    }
  }
  return added;
}

size_t apply_nodes(json& spec, const std::vector<DeviceNode>& nodes, std::vector<std::string>& warnings) {
  if (nodes.empty()) return 0;
  size_t added = 0;
  json& linux_ = child(spec, "linux", json::value_t::object, "linux");
  json& devs = child(linux_, "devices", json::value_t::array, "linux.devices");
  json& rules = child(child(linux_, "resources", json::value_t::object, "linux.resources"), "devices", json::value_t::array,
                      "linux.resources.devices");
  for (const auto& n : nodes) {
    if (n.type.empty() || (n.type != "p" && (!n.major || !n.minor)))
      throw Error(Code::Internal, n.origin + ": device node " + n.path + " has no type/major/minor");
    auto it =
        std::find_if(devs.begin(), devs.end(), [&](const json& d) { return d.is_object() && d.value("path", "") == n.path; });
    if (it == devs.end()) {
      json d = {{"path", n.path}, {"type", n.type}};
      if (n.major) d["major"] = *n.major;
      if (n.minor) d["minor"] = *n.minor;
      if (n.file_mode) d["fileMode"] = *n.file_mode;
      if (n.uid) d["uid"] = *n.uid;
      if (n.gid) d["gid"] = *n.gid;
      devs.push_back(d);
      ++added;
    } else if (n.major && (!same_num(*it, "major", *n.major) || !same_num(*it, "minor", *n.minor))) {
      warnings.push_back("config.json: linux.devices already has " + n.path + " with another major/minor; kept");
    }
    if (n.type == "p" || !n.major) continue;
    std::string access = n.permissions.empty() ? "rwm" : n.permissions;
    bool have = std::any_of(rules.begin(), rules.end(), [&](const json& r) {
      if (!r.is_object() || !r.value("allow", false) || r.value("type", "a") != n.type) return false;
      if (!same_num(r, "major", *n.major) || !same_num(r, "minor", *n.minor)) return false;
      std::string a = r.value("access", "rwm");
      return std::all_of(access.begin(), access.end(), [&](char c) { return a.find(c) != std::string::npos; });
    });
    if (!have) {
      rules.push_back({{"allow", true}, {"type", n.type}, {"major", *n.major}, {"minor", *n.minor}, {"access", access}});
      ++added;
    }
  }
  return added;
}

size_t apply_mounts(json& spec, const std::vector<MountEdit>& mounts, std::vector<std::string>& warnings) {
  if (mounts.empty()) return 0;
  size_t added = 0;
  json& list = child(spec, "mounts", json::value_t::array, "mounts");
  for (const auto& m : mounts) {
    auto it = std::find_if(list.begin(), list.end(),
                           [&](const json& x) { return x.is_object() && x.value("destination", "") == m.container_path; });
    if (it != list.end()) {
      if (it->value("source", "") != m.host_path)
        warnings.push_back("config.json: mounts already has " + m.container_path + " from " + it->value("source", "?") +
                           "; kept instead of " + m.host_path);
      continue;
    }
    list.push_back({{"destination", m.container_path}, {"type", m.type}, {"source", m.host_path}, {"options", m.options}});
    ++added;
  }
  return added;
}

size_t apply_hooks(json& spec, const std::vector<HookEdit>& hooks) {
  if (hooks.empty()) return 0;
  size_t added = 0;
  json& all = child(spec, "hooks", json::value_t::object, "hooks");
  for (const auto& h : hooks) {
    json& list = child(all, h.hook_name, json::value_t::array, "hooks." + h.hook_name);
    json args = h.args;
    bool have = std::any_of(list.begin(), list.end(), [&](const json& x) {
      return x.is_object() && x.value("path", "") == h.path && x.value("args", json::array()) == args;
    });
    if (have) continue;
    json e = {{"path", h.path}};
    if (!h.args.empty()) e["args"] = h.args;
    if (!h.env.empty()) e["env"] = h.env;
    if (h.timeout) e["timeout"] = *h.timeout;
    list.push_back(e);
    ++added;
  }
  return added;
}

size_t apply_gids(json& spec, const std::vector<uint32_t>& gids) {
  if (gids.empty()) return 0;
  size_t added = 0;
  json& user = child(child(spec, "process", json::value_t::object, "process"), "user", json::value_t::object, "process.user");
  json& list = child(user, "additionalGids", json::value_t::array, "process.user.additionalGids");
  for (auto g : gids)
    if (std::find(list.begin(), list.end(), json(g)) == list.end()) {
      list.push_back(g);
      ++added;
    }
  return added;
}

}  // namespace

size_t apply_edits(json& spec, const ContainerEdits& edits, std::vector<std::string>& warnings) {
  if (!spec.is_object()) throw Error(Code::InvalidArgument, "config.json: not a JSON object");
  return apply_env(spec, edits.env) + apply_nodes(spec, edits.device_nodes, warnings) +
         apply_mounts(spec, edits.mounts, warnings) + apply_hooks(spec, edits.hooks) + apply_gids(spec, edits.additional_gids);
}

}  // namespace nvproxy::gpu
