#include "checkpoint/image/gpu_record.h"

#include <set>

#include "common/error.h"
#include "common/json_integer.h"

namespace nvproxy::checkpoint {

using nlohmann::json;

GpuRecord make_gpu_record(const GpuHostFacts& facts, const std::vector<ProcessIdentity>& cuda_processes) {
  GpuRecord r{.driver_version = facts.driver_version};
  std::set<std::string> used;
  for (const auto& p : cuda_processes) {
    RecordedProcess rp{.id = p};
    if (auto it = facts.processes.find(p.host_pid); it != facts.processes.end()) rp.gpus = it->second;
    for (const auto& g : rp.gpus) used.insert(g.uuid);
    r.processes.push_back(std::move(rp));
  }
  for (const auto& d : facts.devices)
    if (used.contains(d.uuid)) r.devices.push_back(d);
  return r;
}

json to_json(const GpuRecord& r) {
  GpuHostFacts as_facts{.driver_version = r.driver_version, .devices = r.devices};
  json j = to_json(as_facts);
  j.erase("processes");
  j["driver_branch"] = driver_branch(r.driver_version);
  json procs = json::array();
  for (const auto& p : r.processes) {
    json gpus = json::array();
    for (const auto& g : p.gpus) {
      json e{{"uuid", g.uuid}};
      if (g.used_bytes) e["used_bytes"] = *g.used_bytes;
      gpus.push_back(std::move(e));
    }
    procs.push_back({{"pid", p.id.pid}, {"host_pid", p.id.host_pid}, {"name", p.id.name}, {"gpus", std::move(gpus)}});
  }
  j["processes"] = std::move(procs);
  return j;
}

GpuRecord gpu_record_from_json(const json& j) {
  try {
    json as_facts = j;
    as_facts["processes"] = json::object();
    GpuHostFacts f = host_facts_from_json(as_facts);
    GpuRecord r{.driver_version = f.driver_version, .devices = std::move(f.devices)};
    for (const auto& p : j.at("processes")) {
      RecordedProcess rp{.id = {.host_pid = json_integer_or(p, "host_pid", pid_t{0}),
                                .pid = json_integer<pid_t>(p.at("pid"), "processes.pid"),
                                .name = p.value("name", std::string())}};
      for (const auto& g : p.at("gpus")) {
        GpuProcessUse use{.uuid = g.at("uuid").get<std::string>()};
        if (g.contains("used_bytes")) use.used_bytes = json_integer<std::uint64_t>(g.at("used_bytes"), "used_bytes");
        rp.gpus.push_back(std::move(use));
      }
      r.processes.push_back(std::move(rp));
    }
    return r;
  } catch (const Error& e) {
    throw Error(Code::InvalidArgument, std::string("GPU record: ") + e.what());
  } catch (const std::exception& e) {
    throw Error(Code::InvalidArgument, std::string("malformed GPU record: ") + e.what());
  }
}

}  // namespace nvproxy::checkpoint
