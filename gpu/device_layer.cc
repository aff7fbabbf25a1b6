#include "gpu/device_layer.h"

#include <sstream>

#include "common/error.h"
#include "gpu/cdi_registry.h"
#include "gpu/device_request.h"
#include "gpu/discovery.h"
#include "gpu/record.h"
#include "gpu/runsc_flags.h"
#include "gpu/spec_edits.h"

namespace nvproxy::gpu {

using nlohmann::json;

namespace {

struct Plan {
  std::string mode;
  std::vector<std::string> devices;
  ContainerEdits edits;
};

// NVIDIA_VISIBLE_DEVICES entries as the CDI names `nvidia-ctk cdi generate` gives them.
std::vector<std::string> visible_as_cdi(const GpuRequest& req) {
  if (req.visible_all) return {"nvidia.com/gpu=all"};
  std::vector<std::string> out;
  for (const auto& v : req.visible) out.push_back("nvidia.com/gpu=" + v);
  return out;
}

void add_cdi(Plan& p, const CdiRegistry& reg, const std::vector<std::string>& names) {
  CdiResolution r = reg.resolve(names);
  merge_edits(p.edits, r.edits);
  p.devices.insert(p.devices.end(), r.devices.begin(), r.devices.end());
}

void add_discovered(Plan& p, const GpuRequest& req, const GpuConfig& cfg, std::vector<std::string>& warnings) {
  Discovered d = discover(req, cfg);
  merge_edits(p.edits, d.edits);
  p.devices.insert(p.devices.end(), d.devices.begin(), d.devices.end());
  warnings.insert(warnings.end(), d.warnings.begin(), d.warnings.end());
}

Plan plan(const GpuRequest& req, const GpuConfig& cfg, Logger& log, std::vector<std::string>& warnings) {
  Plan p;
  bool want_visible = req.visible_all || !req.visible.empty();
  if (cfg.mode == "legacy") {
    if (!req.cdi_names.empty())
      throw Error(Code::FailedPrecondition, "CDI device " + req.cdi_names.front() + " requested but gpu.mode is legacy");
    add_discovered(p, req, cfg, warnings);
    p.mode = "legacy";
    return p;
  }
  CdiRegistry reg = CdiRegistry::load(cfg.cdi_spec_dirs, &log);
  bool used_cdi = false, used_legacy = false;
  if (!req.cdi_names.empty()) {
    add_cdi(p, reg, req.cdi_names);
    used_cdi = true;
  }
  if (want_visible) {
    auto names = visible_as_cdi(req);
    bool all_in_cdi = true;
    for (const auto& n : names) all_in_cdi = all_in_cdi && reg.can_resolve(n);
    if (all_in_cdi || cfg.mode == "cdi") {
      add_cdi(p, reg, names);  // in cdi mode this throws for a name no spec defines
      used_cdi = true;
    } else {
      GpuRequest only_visible = req;
      only_visible.cdi_names.clear();
      add_discovered(p, only_visible, cfg, warnings);
      used_legacy = true;
    }
  }
  p.mode = used_cdi && used_legacy ? "cdi+legacy" : used_cdi ? "cdi" : "legacy";
  return p;
}

}  // namespace

DeviceLayerResult apply_device_layer(json& spec, const GpuConfig& cfg, Logger& log) {
  validate_gpu_config(cfg);
  DeviceLayerResult res;
  if (cfg.mode == "off") return res;
  std::optional<json> previous = read_record(spec);
  GpuRequest req = previous ? request_from_record(*previous) : parse_request(spec);
  res.warnings = req.warnings;
  if (!req.requested) return res;
  res.gpu_requested = true;

  Plan p = plan(req, cfg, log, res.warnings);
  fill_host_info(p.edits, cfg.dev_root, res.warnings);
  bool with_hook = !cfg.hook_binary.empty();
  if (with_hook) {
    // createContainer, not createRuntime: runc runs createContainer hooks in the container's mount
    // namespace after the rootfs mounts and device nodes exist but before pivot_root, so the hook
    // sees the injected libraries under the rootfs path and can check /dev nodes. A createRuntime
    // hook runs in the runtime's namespace, where the container's private mounts (and its /dev
    // tmpfs) are invisible. nvidia-ctk's CDI hooks use createContainer for the same reason.
    std::vector<std::string> args{cfg.hook_binary, "hook", kHookName};
    // runsc runs the hook in its gofer, after binding the driver files and the device files that
    // nvproxy passes through (nvidiactl, nvidia-uvm, nvidiaN) into the rootfs; --runsc checks only those.
    if (cfg.runtime == "runsc") args.emplace_back("--runsc");
    p.edits.hooks.push_back({"createContainer", cfg.hook_binary, args, {}, 60, "gpu.hook_binary"});
  }
  res.added = apply_edits(spec, p.edits, res.warnings);
  res.mode = p.mode;
  res.devices = p.devices;
  res.record = make_record(p.mode, p.devices, req, p.edits, with_hook);
  if (!spec.contains("annotations") || spec["annotations"].is_null()) spec["annotations"] = json::object();
  if (!spec["annotations"].is_object()) throw Error(Code::InvalidArgument, "config.json: annotations: must be an object");
  spec["annotations"][kRecordAnnotation] = res.record.dump();
  // Warnings are returned, not logged: the caller logs them with the container id.
  log.debug("GPU layer: " + p.mode + ", " + std::to_string(res.devices.size()) + " devices, " + std::to_string(res.added) +
            " new edits");
  return res;
}

std::string describe_edits(const json& spec, const GpuConfig& cfg, bool as_json) {
  json copy = spec;
  Logger quiet(-1);
  DeviceLayerResult r = apply_device_layer(copy, cfg, quiet);
  auto flags = runsc_flags(copy, cfg);
  if (as_json) {
    json out = {{"gpuRequested", r.gpu_requested},
                {"mode", r.mode},
                {"devices", r.devices},
                {"added", r.added},
                {"record", r.record},
                {"warnings", r.warnings},
                {"runscFlags", flags},
                {"spec", copy}};
    return out.dump(2) + "\n";
  }
  std::ostringstream o;
  if (!r.gpu_requested) {
    o << "no GPU requested (NVIDIA_VISIBLE_DEVICES unset/void/none, no CDI annotation, or gpu.mode off): no edits\n";
    for (const auto& w : r.warnings) o << "warning: " << w << "\n";
    return o.str();
  }
  o << "mode: " << r.mode << "\ndevices:";
  for (const auto& d : r.devices) o << " " << d;
  o << "\nnew edits: " << r.added << "\n";
  for (const auto& n : r.record["nodes"])
    o << "device " << n["path"].get<std::string>() << " " << n.value("type", "?") << " " << n.value("major", -1) << ":"
      << n.value("minor", -1) << "\n";
  for (const auto& m : r.record["mounts"])
    o << "mount " << m["source"].get<std::string>() << " -> " << m["destination"].get<std::string>()
      << " (ro,nosuid,nodev,bind)\n";
  for (const auto& s : r.record["symlinks"])
    o << "symlink " << s["path"].get<std::string>() << " -> " << s["target"].get<std::string>() << " (by hook)\n";
  if (copy.contains("process") && copy["process"].contains("env"))
    for (const auto& e : copy["process"]["env"])
      if (e.is_string() && e.get<std::string>().rfind("NVIDIA_", 0) == 0) o << "env " << e.get<std::string>() << "\n";
  if (copy.contains("hooks"))
    for (const auto& [name, list] : copy["hooks"].items())
      for (const auto& h : list) o << "hook " << name << " " << h.value("path", "") << "\n";
  o << "runsc flags:";
  for (const auto& f : flags) o << " " << f;
  o << "\n";
  for (const auto& w : r.warnings) o << "warning: " << w << "\n";
  return o.str();
}

}  // namespace nvproxy::gpu
