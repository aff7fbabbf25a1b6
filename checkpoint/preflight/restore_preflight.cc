#include "checkpoint/preflight/restore_preflight.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "common/error.h"
#include "common/json_integer.h"

namespace nvproxy::checkpoint {

using nlohmann::json;
namespace fs = std::filesystem;

ProcessIdentity identify_process(pid_t host_pid, const fs::path& proc_root) {
  ProcessIdentity id{.host_pid = host_pid, .pid = host_pid};
  fs::path dir = proc_root / std::to_string(host_pid);
  std::ifstream comm(dir / "comm");
  std::getline(comm, id.name);
  std::ifstream status(dir / "status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("NSpid:", 0) != 0) continue;
    std::istringstream ss(line.substr(6));
    long v = 0, last = 0;
    while (ss >> v) last = v;
    if (last > 0) id.pid = static_cast<pid_t>(last);
    break;
  }
  return id;
}

namespace {

std::string quoted(const std::string& s) {
  return "\"" + s + "\"";
}

std::string proc_label(const ProcessIdentity& p) {
  return "pid " + std::to_string(p.pid) + " (" + (p.name.empty() ? "?" : p.name) + ")";
}

// "a", "a and b", "a, b and c", at most 4 named then "and N more".
std::string join_and(const std::vector<std::string>& items) {
  constexpr size_t kMax = 4;
  std::string out;
  size_t shown = std::min(items.size(), kMax);
  for (size_t i = 0; i < shown; ++i) {
    if (i > 0) out += (i + 1 == shown && items.size() <= kMax) ? " and " : ", ";
    out += items[i];
  }
  if (items.size() > kMax) out += " and " + std::to_string(items.size() - kMax) + " more";
  return out;
}

std::string gpu_label(const std::string& name, const std::string& uuid) {
  return name.empty() ? uuid : quoted(name) + " (" + uuid + ")";
}

std::string host_gpu(const GpuDeviceFacts& d) {
  return "GPU " + std::to_string(d.index) + " " + gpu_label(d.name, d.uuid);
}

// What this host has, for "model" refusals: "this host's GPU 0 is "A" (GPU-..)" and the like.
std::string host_gpus(const GpuHostFacts& host) {
  if (host.devices.empty()) return "this host has no GPU";
  if (host.devices.size() == 1) return "this host's GPU 0 is " + gpu_label(host.devices[0].name, host.devices[0].uuid);
  std::vector<std::string> all;
  for (const auto& d : host.devices) all.push_back(std::to_string(d.index) + " " + gpu_label(d.name, d.uuid));
  return "this host's GPUs are " + join_and(all);
}

// The processes that used one recorded GPU, with the memory each held there.
struct OnGpu {
  const GpuDeviceFacts* recorded = nullptr;  // nullptr: the record lacks the device's facts
  std::string uuid;
  std::vector<std::pair<const RecordedProcess*, std::optional<std::uint64_t>>> procs;
  [[nodiscard]] std::uint64_t need() const {
    std::uint64_t n = 0;
    for (const auto& [p, b] : procs) n += b.value_or(0);
    return n;
  }
  [[nodiscard]] std::vector<pid_t> pids() const {
    std::vector<pid_t> out;
    for (const auto& [p, b] : procs) out.push_back(p->id.pid);
    return out;
  }
  [[nodiscard]] std::string name() const { return recorded ? recorded->name : std::string(); }
  // "pid 41 (python3) was checkpointed on "NVIDIA H200" (GPU-..) with 4.7 GiB"
  [[nodiscard]] std::string who() const {
    std::vector<std::string> parts;
    for (const auto& [p, b] : procs) parts.push_back(proc_label(p->id) + (b ? " with " + format_bytes(*b) : ""));
    std::string on = gpu_label(name(), uuid);
    if (procs.size() == 1) {
      const auto& [p, b] = procs.front();
      return proc_label(p->id) + " was checkpointed on " + on + (b ? " with " + format_bytes(*b) : "");
    }
    return join_and(parts) + " were checkpointed on " + on + " (" + format_bytes(need()) + " in all)";
  }
};

std::vector<OnGpu> by_gpu(const GpuRecord& rec) {
  std::vector<OnGpu> out;
  auto slot = [&](const std::string& uuid) -> OnGpu& {
    for (auto& g : out)
      if (g.uuid == uuid) return g;
    OnGpu g{.uuid = uuid};
    for (const auto& d : rec.devices)
      if (d.uuid == uuid) g.recorded = &d;
    out.push_back(std::move(g));
    return out.back();
  };
  for (const auto& d : rec.devices) slot(d.uuid);  // the record's device order first
  for (const auto& p : rec.processes)
    for (const auto& g : p.gpus) slot(g.uuid).procs.emplace_back(&p, g.used_bytes);
  std::erase_if(out, [](const OnGpu& g) { return g.procs.empty(); });
  return out;
}

std::string all_processes(const GpuRecord& rec) {
  std::vector<std::string> who;
  for (const auto& p : rec.processes) who.push_back(proc_label(p.id));
  return join_and(who) + (rec.processes.size() == 1 ? " was" : " were");
}

RestoreCheck check_on(const GpuRecord& rec, const GpuHostFacts& host, RestoreCheck& out);

}  // namespace

std::optional<std::set<std::string>> visible_gpus(const std::vector<std::string>& tokens, const GpuHostFacts& host,
                                                  std::vector<std::string>& unknown) {
  if (tokens.empty()) return std::nullopt;
  std::set<std::string> out;
  for (const auto& t : tokens) {
    if (t == "all") return std::nullopt;
    bool found = false;
    for (const auto& d : host.devices) {
      if (d.uuid == t || (!t.empty() && t.find_first_not_of("0123456789") == std::string::npos && std::to_string(d.index) == t)) {
        out.insert(d.uuid);
        found = true;
      }
    }
    if (!found) unknown.push_back(t);
  }
  return out;
}

RestoreCheck check_restore(const GpuRecord& rec, const GpuHostFacts& host, const std::optional<std::set<std::string>>& visible) {
  RestoreCheck out;
  if (rec.processes.empty()) return out;
  // Only the GPUs the restoring container gets are places to restore onto.
  GpuHostFacts usable = host;
  if (visible) std::erase_if(usable.devices, [&](const GpuDeviceFacts& d) { return !visible->count(d.uuid); });
  return check_on(rec, usable, out);
}

namespace {

RestoreCheck check_on(const GpuRecord& rec, const GpuHostFacts& host, RestoreCheck& out) {
  if (!rec.driver_version.empty() && driver_branch(rec.driver_version) != driver_branch(host.driver_version)) {
    RestoreRefusal r{.kind = "driver"};
    for (const auto& p : rec.processes) r.pids.push_back(p.id.pid);
    r.message = all_processes(rec) + " checkpointed with driver " + rec.driver_version + " (branch " +
                driver_branch(rec.driver_version) + "); this host's driver is " + host.driver_version + " (branch " +
                driver_branch(host.driver_version) + "): CUDA state restores only within a driver branch";
    out.refusals.push_back(std::move(r));
  }

  std::vector<OnGpu> gpus = by_gpu(rec);
  std::vector<bool> taken(host.devices.size(), false);
  std::vector<std::optional<size_t>> placed(gpus.size());
  // The same GPU first (same UUID and model), then any free GPU of the model, most free memory first.
  for (size_t i = 0; i < gpus.size(); ++i) {
    for (size_t h = 0; h < host.devices.size(); ++h) {
      if (!taken[h] && host.devices[h].uuid == gpus[i].uuid &&
          (gpus[i].name().empty() || host.devices[h].name == gpus[i].name())) {
        taken[h] = true;
        placed[i] = h;
        break;
      }
    }
  }
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (placed[i] || gpus[i].name().empty()) continue;
    std::optional<size_t> best;
    for (size_t h = 0; h < host.devices.size(); ++h) {
      if (taken[h] || host.devices[h].name != gpus[i].name()) continue;
      if (!best || host.devices[h].memory_free > host.devices[*best].memory_free) best = h;
    }
    if (!best) continue;
    taken[*best] = true;
    placed[i] = best;
    out.warnings.push_back(gpus[i].who() + "; this host has no GPU " + gpus[i].uuid + ", restoring onto its " +
                           host_gpu(host.devices[*best]) + ", the same model");
  }

  DeviceMap pairs;
  bool moved = false;
  for (size_t i = 0; i < gpus.size(); ++i) {
    const OnGpu& g = gpus[i];
    RestoreRefusal r{.pids = g.pids(), .gpu_uuid = g.uuid, .gpu_name = g.name()};
    if (!placed[i]) {
      size_t same_model = 0;
      std::vector<std::string> theirs;
      for (const auto& d : host.devices) {
        if (g.name().empty() || d.name != g.name()) continue;
        ++same_model;
        theirs.push_back(host_gpu(d));
      }
      if (same_model == 0 && !g.name().empty()) {
        r.kind = "model";
        r.message = g.who() + "; " + host_gpus(host) + ", no " + quoted(g.name());
      } else {
        r.kind = "missing";
        size_t wanted = 0;
        for (const auto& o : gpus)
          if (o.name() == g.name()) ++wanted;
        r.message = g.who() + "; " +
                    (g.name().empty() ? "this host has no GPU " + g.uuid + " (the record lacks its model)"
                                      : "this host has " + std::to_string(same_model) + " " + quoted(g.name()) + " (" +
                                            join_and(theirs) + ") for the checkpoint's " + std::to_string(wanted));
      }
      out.refusals.push_back(std::move(r));
      continue;
    }
    const GpuDeviceFacts& d = host.devices[*placed[i]];
    out.placement[g.uuid] = d.index;
    pairs.push_back({g.uuid, d.uuid});
    moved = moved || d.uuid != g.uuid;
    if (g.need() > d.memory_free) {
      r.kind = "memory";
      r.message = g.who() + "; this host's " + host_gpu(d) + " has " + format_bytes(d.memory_free) + " free of " +
                  format_bytes(d.memory_total);
      out.refusals.push_back(std::move(r));
    }
  }
  if (moved) out.device_map = std::move(pairs);
  return out;
}

}  // namespace

RestoreRefusal nvml_unavailable(const GpuRecord& rec, const std::string& error) {
  RestoreRefusal r{.kind = "nvml"};
  for (const auto& p : rec.processes) r.pids.push_back(p.id.pid);
  std::vector<std::string> on;
  for (const auto& g : by_gpu(rec)) on.push_back(gpu_label(g.name(), g.uuid));
  r.message = all_processes(rec) + " checkpointed with CUDA state" + (on.empty() ? std::string() : " on " + join_and(on)) +
              " (driver " + rec.driver_version + "); this host cannot check its GPUs: " + error;
  return r;
}

std::string refusal_text(const std::string& container, const std::vector<RestoreRefusal>& refusals) {
  std::string out = "restore of " + quoted(container) + " refused: ";
  for (size_t i = 0; i < refusals.size(); ++i) out += (i ? "; " : "") + refusals[i].message;
  return out;
}

json refusal_diagnostic(const std::string& container, const GpuRecord& rec, const GpuHostFacts* host,
                        const std::string& host_error, const RestoreCheck& check) {
  json refusals = json::array();
  for (const auto& r : check.refusals) {
    json e{{"kind", r.kind}, {"pids", r.pids}, {"message", r.message}};
    if (!r.gpu_uuid.empty()) e["gpu"] = {{"uuid", r.gpu_uuid}, {"name", r.gpu_name}};
    refusals.push_back(std::move(e));
  }
  std::string text = refusal_text(container, check.refusals);
  json j{{"container", container},          {"operation", "restore"},     {"verdict", "refused"},     {"reason", text},
         {"refusals", std::move(refusals)}, {"warnings", check.warnings}, {"recorded", to_json(rec)}, {"text", text}};
  if (host) {
    j["host"] = to_json(*host);
  } else {
    j["host_error"] = host_error;
  }
  return j;
}

}  // namespace nvproxy::checkpoint
