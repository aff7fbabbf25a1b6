#include "gpu/runsc_flags.h"

#include "gpu/device_request.h"
#include "gpu/record.h"

namespace nvproxy::gpu {

using nlohmann::json;

bool is_gpu_container(const json& spec, const GpuConfig& cfg) {
  if (auto rec = read_record(spec); rec && rec->contains("nodes") && !(*rec)["nodes"].empty()) return true;
  if (cfg.mode != "off" && parse_request(spec).requested) return true;
  if (spec.is_object() && spec.contains("linux") && spec["linux"].is_object()) {
    const json& l = spec["linux"];
    if (l.contains("devices") && l["devices"].is_array())
      for (const auto& d : l["devices"])
        if (d.is_object() && d.value("path", "").rfind("/dev/nvidia", 0) == 0) return true;
  }
  return false;
}

std::vector<std::string> runsc_flags(const json& spec, const GpuConfig& cfg) {
  validate_gpu_config(cfg);
  if (cfg.nvproxy == "off") return {};
  if (cfg.nvproxy == "auto" && !is_gpu_container(spec, cfg)) return {};
  std::vector<std::string> f = {"--nvproxy"};
  if (!cfg.nvproxy_driver_version.empty()) f.push_back("--nvproxy-driver-version=" + cfg.nvproxy_driver_version);
  return f;
}

}  // namespace nvproxy::gpu
