#include "shim/node/docker_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "shim/node/containerd_config.h"

namespace nvproxy::node {

namespace {

using Json = nlohmann::ordered_json;

std::string line_col(const std::string& text, std::size_t byte) {
  const std::size_t end = std::min(byte > 0 ? byte - 1 : 0, text.size());
  const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<long>(end), '\n');
  const auto nl = text.rfind('\n', end > 0 ? end - 1 : 0);
  const std::size_t col = end - (nl == std::string::npos || end == 0 ? 0 : nl + 1) + 1;
  return std::to_string(line) + ":" + std::to_string(col);
}

std::string form(const Json& j) {
  return j.dump(2) + "\n";
}

Json& object_at(Json& parent, const std::string& key, const std::string& path, const std::string& origin) {
  Json& v = parent[key];
  if (v.is_null()) v = Json::object();
  if (!v.is_object()) throw Error(Code::InvalidArgument, origin + ": " + path + " is not an object");
  return v;
}

}  // namespace

JsonEdit edit_docker_config(const std::string& text, const std::string& origin, const DockerEntry& e) {
  if (e.name.empty()) throw Error(Code::InvalidArgument, "the runtime name is empty");
  Json doc;
  const bool blank = text.find_first_not_of(" \t\r\n") == std::string::npos;
  if (blank) {
    doc = Json::object();
  } else {
    try {
      doc = Json::parse(text);
    } catch (const Json::parse_error& x) {
      // nlohmann's message starts "[json.exception.parse_error.101] parse error at line 3, column 5: ".
      std::string what = x.what();
      if (auto c = what.find(": "); c != std::string::npos) what = what.substr(c + 2);
      throw Error(Code::InvalidArgument, origin + ":" + line_col(text, x.byte) + ": " + what);
    }
    if (!doc.is_object()) throw Error(Code::InvalidArgument, origin + " is not a JSON object");
  }
  JsonEdit out;
  out.before = blank ? "" : form(doc);
  const Json original = doc;
  Json& runtimes = object_at(doc, "runtimes", "runtimes", origin);
  Json& rt = object_at(runtimes, e.name, "runtimes." + e.name, origin);
  rt["runtimeType"] = kRuntimeType;
  if (!e.shim_config.empty()) object_at(rt, "options", "runtimes." + e.name + ".options", origin)["ConfigPath"] = e.shim_config;
  if (!e.exit_config.empty()) {
    const std::string exit_name = e.name + "-exit";
    Json& x = object_at(runtimes, exit_name, "runtimes." + exit_name, origin);
    x["runtimeType"] = kRuntimeType;
    object_at(x, "options", "runtimes." + exit_name + ".options", origin)["ConfigPath"] = e.exit_config;
  }
  if (e.set_as_default) doc["default-runtime"] = e.name;
  if (e.experimental) doc["experimental"] = true;
  if (!doc.value("experimental", false))
    out.notes.push_back(
        "docker checkpoint needs \"experimental\": true (--experimental sets it; dockerd must be restarted for it)");
  out.changed = doc != original;
  out.after = out.changed ? form(doc) : out.before;
  return out;
}

std::string exit_shim_config(const std::string& base, const std::string& origin) {
  YAML::Node doc;
  try {
    doc = base.empty() ? YAML::Node(YAML::NodeType::Map) : YAML::Load(base);
  } catch (const YAML::Exception& x) {
    throw Error(Code::InvalidArgument,
                origin + ":" + std::to_string(x.mark.line + 1) + ":" + std::to_string(x.mark.column + 1) + ": " + x.msg);
  }
  if (doc.IsNull()) doc = YAML::Node(YAML::NodeType::Map);
  if (!doc.IsMap()) throw Error(Code::InvalidArgument, origin + " is not a YAML map");
  YAML::Node cp = doc["checkpoint"];
  if (cp.IsDefined() && !cp.IsNull() && !cp.IsMap()) throw Error(Code::InvalidArgument, origin + ": checkpoint is not a map");
  doc["checkpoint"]["exit_without_options"] = true;
  YAML::Emitter em;
  em << doc;
  return "# The shim config of Docker's runtime for stopping checkpoints (configure docker): docker checkpoint create\n"
         "# without options stops the container.\n" +
         std::string(em.c_str()) + "\n";
}

bool exits_without_options(const std::string& yaml_text) {
  try {
    YAML::Node doc = YAML::Load(yaml_text);
    return doc.IsMap() && doc["checkpoint"].IsMap() && doc["checkpoint"]["exit_without_options"].as<bool>(false);
  } catch (const YAML::Exception&) {
    return false;
  }
}

}  // namespace nvproxy::node
