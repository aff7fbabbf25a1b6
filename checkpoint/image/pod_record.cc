#include "checkpoint/image/pod_record.h"

#include <algorithm>

#include "common/error.h"

namespace nvproxy::checkpoint {

using json = nlohmann::json;

const PodMember* PodRecord::container(const std::string& name) const {
  for (const auto& c : containers)
    if (!c.sandbox && c.name == name) return &c;
  return nullptr;
}

const PodMember* PodRecord::by_id(const std::string& id) const {
  for (const auto& c : containers)
    if (c.id == id) return &c;
  return nullptr;
}

std::vector<std::string> PodRecord::names() const {
  std::vector<std::string> out;
  for (const auto& c : containers)
    if (!c.sandbox) out.push_back(c.name);
  std::sort(out.begin(), out.end());
  return out;
}

json to_json(const PodRecord& r) {
  json cs = json::array();
  for (const auto& c : r.containers) {
    json m{{"name", c.name}, {"id", c.id}, {"gpus", c.gpus}};
    if (c.sandbox) m["sandbox"] = true;
    if (!c.image.empty()) m["image"] = c.image;
    cs.push_back(std::move(m));
  }
  json j{{"sandbox_id", r.sandbox_id}, {"containers", std::move(cs)}};
  if (!r.sandbox_name.empty()) j["sandbox_name"] = r.sandbox_name;
  return j;
}

PodRecord pod_record_from_json(const json& j) {
  if (!j.is_object()) throw Error(Code::InvalidArgument, "\"pod\" is not an object");
  PodRecord r;
  try {
    r.sandbox_id = j.value("sandbox_id", std::string());
    r.sandbox_name = j.value("sandbox_name", std::string());
    if (!j.contains("containers") || !j.at("containers").is_array())
      throw Error(Code::InvalidArgument, "\"pod.containers\" is not a list");
    for (const auto& m : j.at("containers")) {
      if (!m.is_object()) throw Error(Code::InvalidArgument, "an entry of \"pod.containers\" is not an object");
      PodMember c{.name = m.value("name", std::string()),
                  .id = m.value("id", std::string()),
                  .sandbox = m.value("sandbox", false),
                  .image = m.value("image", std::string()),
                  .gpus = m.value("gpus", 0)};
      if (!c.sandbox && c.name.empty()) throw Error(Code::InvalidArgument, "a container of \"pod.containers\" has no name");
      r.containers.push_back(std::move(c));
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(Code::InvalidArgument, std::string("malformed field of \"pod\": ") + e.what());
  }
  return r;
}

std::string gpus_text(int gpus) {
  if (gpus == kAllGpus) return "every GPU";
  if (gpus == 0) return "no GPU";
  return std::to_string(gpus) + (gpus == 1 ? " GPU" : " GPUs");
}

std::vector<std::string> pod_name_mismatches(const PodRecord& image, const std::vector<std::string>& names) {
  std::vector<std::string> out;
  const auto had = image.names();
  std::string missing, extra;
  for (const auto& n : had)
    if (std::find(names.begin(), names.end(), n) == names.end()) missing += (missing.empty() ? "\"" : ", \"") + n + "\"";
  for (const auto& n : names)
    if (std::find(had.begin(), had.end(), n) == had.end()) extra += (extra.empty() ? "\"" : ", \"") + n + "\"";
  if (!missing.empty())
    out.push_back("the image holds container(s) " + missing +
                  " that this pod does not name: runsc restores a sandbox only with every container it saved");
  if (!extra.empty())
    out.push_back("this pod names container(s) " + extra +
                  " that the image does not hold: a container cannot start fresh inside a restored sandbox");
  return out;
}

std::optional<std::string> pod_member_mismatch(const PodRecord& image, const std::string& name, int gpus) {
  const PodMember* m = image.container(name);
  if (!m) {
    std::string list;
    for (const auto& n : image.names()) list += (list.empty() ? "" : ", ") + n;
    return "the image holds no container named \"" + name + "\" (it holds: " + list + ")";
  }
  if (m->gpus != gpus)
    return "container \"" + name + "\" was checkpointed with " + gpus_text(m->gpus) + " and asks for " + gpus_text(gpus) +
           " here: its processes' GPU state restores onto as many GPUs as it had";
  return std::nullopt;
}

}  // namespace nvproxy::checkpoint
