#include "gpu/gpu_config.h"

#include <yaml-cpp/yaml.h>

#include "common/error.h"

namespace nvproxy::gpu {

void validate_gpu_config(const GpuConfig& cfg) {
  if (cfg.mode != "auto" && cfg.mode != "cdi" && cfg.mode != "legacy" && cfg.mode != "off")
    throw Error(Code::InvalidArgument, "gpu.mode: \"" + cfg.mode + "\" is not one of auto, cdi, legacy, off");
  if (cfg.nvproxy != "auto" && cfg.nvproxy != "on" && cfg.nvproxy != "off")
    throw Error(Code::InvalidArgument, "gpu.nvproxy: \"" + cfg.nvproxy + "\" is not one of auto, on, off");
  if (!cfg.hook_binary.empty() && cfg.hook_binary[0] != '/')
    throw Error(Code::InvalidArgument, "gpu.hook_binary: \"" + cfg.hook_binary + "\" is not an absolute path");
}

GpuConfig gpu_config_from_yaml(const YAML::Node& gpu, const std::string& where) {
  GpuConfig cfg;
  if (!gpu || gpu.IsNull()) return cfg;
  if (!gpu.IsMap()) throw Error(Code::InvalidArgument, where + ": gpu: must be a mapping");
  auto str = [&](const char* key, std::string& out) {
    const YAML::Node n = gpu[key];
    if (!n) return;
    if (!n.IsScalar()) throw Error(Code::InvalidArgument, where + ": gpu." + key + ": must be a string");
    out = n.Scalar();
  };
  str("mode", cfg.mode);
  str("driver_root", cfg.driver_root);
  str("dev_root", cfg.dev_root);
  str("proc_driver_root", cfg.proc_driver_root);
  str("nvproxy", cfg.nvproxy);
  str("nvproxy_driver_version", cfg.nvproxy_driver_version);
  str("hook_binary", cfg.hook_binary);
  if (cfg.nvproxy == "true") cfg.nvproxy = "on";  // YAML 1.1 booleans read as words
  if (cfg.nvproxy == "false") cfg.nvproxy = "off";
  if (const YAML::Node d = gpu["cdi_spec_dirs"]) {
    if (!d.IsSequence()) throw Error(Code::InvalidArgument, where + ": gpu.cdi_spec_dirs: must be a list");
    cfg.cdi_spec_dirs.clear();
    for (size_t i = 0; i < d.size(); ++i) {
      if (!d[i].IsScalar())
        throw Error(Code::InvalidArgument, where + ": gpu.cdi_spec_dirs[" + std::to_string(i) + "]: must be a string");
      cfg.cdi_spec_dirs.push_back(d[i].Scalar());
    }
  }
  try {
    validate_gpu_config(cfg);
  } catch (const Error& e) {
    throw Error(e.code(), where + ": " + e.what());
  }
  return cfg;
}

}  // namespace nvproxy::gpu
