#include "checkpoint/facts/gpu_facts.h"

#include <array>
#include <cstdio>

#include "common/error.h"
#include "common/json_integer.h"
#include "common/number.h"

namespace nvproxy::checkpoint {

using nlohmann::json;

std::string driver_branch(const std::string& version) {
  return version.substr(0, version.find('.'));
}

std::string format_bytes(std::uint64_t bytes) {
  static constexpr std::array<const char*, 5> kUnits{"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  auto v = static_cast<double>(bytes) / 1024;
  size_t u = 0;
  while (v >= 1024 && u + 1 < kUnits.size()) {
    v /= 1024;
    ++u;
  }
  std::array<char, 32> buf{};
  std::snprintf(buf.data(), buf.size(), "%.1f %s", v, kUnits.at(u));
  return buf.data();
}

json to_json(const GpuHostFacts& f) {
  json devices = json::array();
  for (const auto& d : f.devices) {
    devices.push_back({{"index", d.index},
                       {"uuid", d.uuid},
                       {"name", d.name},
                       {"memory_total", d.memory_total},
                       {"memory_free", d.memory_free},
                       {"memory_used", d.memory_used}});
  }
  json procs = json::object();
  for (const auto& [pid, uses] : f.processes) {
    json a = json::array();
    for (const auto& u : uses) {
      json e{{"uuid", u.uuid}};
      if (u.used_bytes) e["used_bytes"] = *u.used_bytes;
      a.push_back(std::move(e));
    }
    procs[std::to_string(pid)] = std::move(a);
  }
  return {{"driver_version", f.driver_version}, {"devices", std::move(devices)}, {"processes", std::move(procs)}};
}

GpuHostFacts host_facts_from_json(const json& j) {
  GpuHostFacts f;
  try {
    f.driver_version = j.at("driver_version").get<std::string>();
    for (const auto& d : j.at("devices")) {
      f.devices.push_back({.index = json_integer<unsigned>(d.at("index"), "devices.index"),
                           .uuid = d.at("uuid").get<std::string>(),
                           .name = d.at("name").get<std::string>(),
                           .memory_total = json_integer<std::uint64_t>(d.at("memory_total"), "devices.memory_total"),
                           .memory_free = json_integer<std::uint64_t>(d.at("memory_free"), "devices.memory_free"),
                           .memory_used = json_integer<std::uint64_t>(d.at("memory_used"), "devices.memory_used")});
    }
    for (const auto& [pid, uses] : j.at("processes").items()) {
      auto& out = f.processes[parse_number_or_throw<pid_t>(pid, "processes: pid")];
      for (const auto& u : uses) {
        GpuProcessUse use{.uuid = u.at("uuid").get<std::string>()};
        if (u.contains("used_bytes")) use.used_bytes = json_integer<std::uint64_t>(u.at("used_bytes"), "used_bytes");
        out.push_back(std::move(use));
      }
    }
  } catch (const std::exception& e) {
    throw Error(Code::Internal, std::string("malformed GPU facts: ") + e.what());
  }
  return f;
}

}  // namespace nvproxy::checkpoint
