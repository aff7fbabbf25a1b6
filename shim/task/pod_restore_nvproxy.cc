#include "shim/task/pod_restore_nvproxy.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "checkpoint/image/image_record.h"
#include "gpu/runsc_flags.h"

namespace nvproxy::shim {

std::vector<std::string> pod_sandbox_restore_flags(const ContainerSetup& s, const std::filesystem::path& image, Logger& log) {
  std::vector<std::string> flags = s.runtime_global;
  if (!s.pod_restore || !s.pod_restore->name.empty() || s.config.gpu.nvproxy != "auto") return flags;
  if (std::find(flags.begin(), flags.end(), "--nvproxy") != flags.end()) return flags;
  std::vector<std::string> gpu_containers;
  try {
    auto rec = checkpoint::read_image_record(image);
    if (!rec || !rec->pod) return flags;
    for (const auto& m : rec->pod->containers)
      if (!m.sandbox && m.gpus != 0) gpu_containers.push_back(m.name);
  } catch (const std::exception&) {
    return flags;
  }
  if (gpu_containers.empty()) return flags;
  gpu::GpuConfig on = s.config.gpu;
  on.nvproxy = "on";
  auto add = gpu::runsc_flags(nlohmann::json::object(), on);  // "on" asks nothing of the spec
  flags.insert(flags.end(), add.begin(), add.end());
  std::string names;
  for (const auto& n : gpu_containers) names += (names.empty() ? "" : ", ") + n;
  log.info("restore of pod sandbox \"" + s.id + "\": the image's GPU containers (" + names +
           ") ran with nvproxy, so the sandbox boots with it (gpu.nvproxy: auto)");
  return flags;
}

}  // namespace nvproxy::shim
