#include "shim/gpu_setup.h"

#include "gpu/device_layer.h"
#include "gpu/runsc_flags.h"
#include "oci/runtime_flavor.h"
#include "shim/container.h"
#include "shim/task_service.h"

namespace nvproxy::shim {

bool prepare_gpu(Container& c, oci::Spec& spec, const ServiceEnv& env) {
  gpu::GpuConfig cfg = c.config.gpu;
  if (cfg.hook_binary.empty()) cfg.hook_binary = env.self_binary;
  auto res = gpu::apply_device_layer(spec.json(), cfg, env.log);
  for (const auto& w : res.warnings) env.log.warn("container \"" + c.id + "\": " + w);
  if (!res.gpu_requested) return false;
  spec.save(c.bundle);
  std::string devs;
  for (const auto& d : res.devices) devs += (devs.empty() ? "" : ",") + d;
  env.log.info("container \"" + c.id + "\": GPU layer (" + res.mode + ") devices [" + devs + "], " + std::to_string(res.added) +
               " edits");
  if (oci::runtime_kind_from_binary(c.config.runtime.binary) == oci::RuntimeKind::Runsc)
    c.runtime_global = gpu::runsc_flags(spec.json(), c.config.gpu);
  return true;
}

}  // namespace nvproxy::shim
