#include "shim/task/gpu_setup.h"

#include "gpu/device_layer.h"
#include "gpu/runsc_flags.h"
#include "oci/runtime_flavor.h"

namespace nvproxy::shim {

GpuSetup prepare_gpu(const std::string& id, const std::filesystem::path& bundle, const ShimConfig& config, oci::Spec& spec,
                     const std::string& self_binary, Logger& log) {
  gpu::GpuConfig cfg = config.gpu;
  if (cfg.hook_binary.empty()) cfg.hook_binary = self_binary;
  auto res = gpu::apply_device_layer(spec.json(), cfg, log);
  for (const auto& w : res.warnings) log.warn("container \"" + id + "\": " + w);
  GpuSetup out;
  if (!res.gpu_requested) return out;
  spec.save(bundle);
  std::string devs;
  for (const auto& d : res.devices) devs += (devs.empty() ? "" : ",") + d;
  log.info("container \"" + id + "\": GPU layer (" + res.mode + ") devices [" + devs + "], " + std::to_string(res.added) +
           " edits");
  out.gpu = true;
  if (oci::runtime_kind_from_binary(config.runtime.binary) == oci::RuntimeKind::Runsc)
    out.runtime_global = gpu::runsc_flags(spec.json(), config.gpu);
  return out;
}

}  // namespace nvproxy::shim
