#include "shim/task/gpu_setup.h"

#include "checkpoint/sandbox/sandbox_tools.h"
#include "gpu/device_layer.h"
#include "gpu/runsc_flags.h"
#include "oci/runtime_flavor.h"

namespace nvproxy::shim {

namespace {

// Under runsc the shim's checkpoint asks its questions inside the sandbox (checkpoint/sandbox/sandbox_tools.h):
// the container gets the agent, with its loader and libc, read-only at /.nvproxy.
void add_sandbox_tools(const std::string& id, const std::filesystem::path& bundle, oci::Spec& spec, Logger& log) {
  auto dir = bundle / "nvproxy-sandbox-tools";
  try {
    checkpoint::stage_sandbox_tools(dir, checkpoint::default_sandbox_agent_path());
  } catch (const Error& e) {
    // The container runs without; its GPU checkpoint will say why it cannot look inside.
    log.warn("container \"" + id + "\": no sandbox tools for GPU checkpoints: " + e.what());
    return;
  }
  auto& j = spec.json();
  if (!j.contains("mounts") || !j["mounts"].is_array()) j["mounts"] = nlohmann::json::array();
  for (const auto& m : j["mounts"])
    if (m.is_object() && m.value("destination", "") == checkpoint::kSandboxToolsMount) return;
  j["mounts"].push_back(checkpoint::sandbox_tools_mount(dir));
}

}  // namespace

GpuSetup prepare_gpu(const std::string& id, const std::filesystem::path& bundle, const ShimConfig& config, oci::Spec& spec,
                     const std::string& self_binary, Logger& log) {
  gpu::GpuConfig cfg = config.gpu;
  if (cfg.hook_binary.empty()) cfg.hook_binary = self_binary;
  const bool runsc = oci::runtime_kind_from_binary(config.runtime.binary) == oci::RuntimeKind::Runsc;
  if (runsc) cfg.runtime = "runsc";
  auto res = gpu::apply_device_layer(spec.json(), cfg, log);
  for (const auto& w : res.warnings) log.warn("container \"" + id + "\": " + w);
  GpuSetup out;
  if (!res.gpu_requested) {
    // gpu.nvproxy: on is every container's, a pod's sandbox container (CRI's pause, which asks for
    // no GPU) first: runsc sets nvproxy up only when it boots the sandbox, from the root
    // container's flags, so a GPU container of a pod whose sandbox booted without it has no GPU.
    if (runsc && config.gpu.nvproxy == "on") out.runtime_global = gpu::runsc_flags(spec.json(), config.gpu);
    return out;
  }
  if (runsc) add_sandbox_tools(id, bundle, spec, log);
  spec.save(bundle);
  std::string devs;
  for (const auto& d : res.devices) devs += (devs.empty() ? "" : ",") + d;
  log.info("container \"" + id + "\": GPU layer (" + res.mode + ") devices [" + devs + "], " + std::to_string(res.added) +
           " edits");
  out.gpu = true;
  if (runsc) out.runtime_global = gpu::runsc_flags(spec.json(), config.gpu);
  return out;
}

}  // namespace nvproxy::shim
