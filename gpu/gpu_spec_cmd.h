// `containerd-shim-nvproxy-v1 gpu-spec`: shows the GPU edits the shim would make to a bundle's
// config.json, without changing anything. For operators checking CDI specs and discovery.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace nvproxy::gpu {

// args: the words after "gpu-spec" (a leading "gpu-spec" is skipped too).
//   --bundle DIR | --spec FILE      the config.json to read (one is required)
//   --config FILE                   shim config whose `gpu:` section is used (default: env
//                                   NVPROXY_SHIM_CONFIG, else /etc/containerd-shim-nvproxy/config.yaml if present)
//   --mode M, --cdi-spec-dir DIR (repeatable), --driver-root DIR, --dev-root DIR,
//   --proc-driver-root DIR, --hook-binary PATH, --nvproxy-driver-version V   override the config
//   --json                          machine-readable output (includes the edited spec)
// Returns 0, 1 on an error ("error: MSG" on err), 2 on a usage error.
int gpu_spec_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace nvproxy::gpu
