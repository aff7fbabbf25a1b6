#include "oci/shadowed_mounts.h"

#include <filesystem>
#include <map>

namespace nvproxy::oci {

namespace {

std::string field(const nlohmann::json& m, const char* key) {
  auto it = m.find(key);
  return it != m.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string summary(std::size_t index, const nlohmann::json& m) {
  std::string type = field(m, "type");
  std::string source = field(m, "source");
  std::string what = type.empty() ? "bind" : type;
  if (!source.empty() && source != type) what += " " + source;
  return "mount " + std::to_string(index) + " (" + what + " at " + field(m, "destination") + ")";
}

}  // namespace

std::string normalize_destination(const std::string& destination) {
  std::string n = std::filesystem::path(destination).lexically_normal().string();
  while (n.size() > 1 && n.back() == '/') n.pop_back();
  return n;
}

std::vector<std::string> drop_shadowed_mounts(nlohmann::json& spec) {
  auto it = spec.find("mounts");
  if (it == spec.end() || !it->is_array()) return {};
  nlohmann::json& mounts = *it;
  // The last mount at each destination is the one the container sees.
  std::map<std::string, std::size_t> last;
  for (std::size_t i = 0; i < mounts.size(); ++i) {
    if (!mounts[i].is_object()) return {};
    std::string dst = field(mounts[i], "destination");
    if (dst.empty()) return {};
    last[normalize_destination(dst)] = i;
  }
  std::vector<std::string> dropped;
  nlohmann::json kept = nlohmann::json::array();
  for (std::size_t i = 0; i < mounts.size(); ++i) {
    std::size_t winner = last[normalize_destination(field(mounts[i], "destination"))];
    if (winner == i) {
      kept.push_back(mounts[i]);
      continue;
    }
    dropped.push_back(summary(i, mounts[i]) + " is shadowed by " + summary(winner, mounts[winner]));
  }
  if (!dropped.empty()) mounts = std::move(kept);
  return dropped;
}

}  // namespace nvproxy::oci
