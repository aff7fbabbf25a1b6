// `containerd-shim-nvproxy-v1 hook NAME [--ldconfig PATH] [--no-ldconfig]`: OCI hooks the device layer
// adds to config.json; the runtime runs them with the OCI state JSON on stdin.
#pragma once

#include <istream>
#include <ostream>
#include <string>
#include <vector>

namespace nvproxy::hooks {

// args: the words after the program name ("hook", NAME, options...; the leading "hook" is optional).
// Known NAME: "gpu-setup" (gpu::kHookName). Returns 0, 1 on failure ("nvproxy hook NAME: container
// \"ID\": MSG" on err, which runc shows in its create error), 2 on a usage error.
int hook_main(const std::vector<std::string>& args, std::istream& state_json, std::ostream& err);

}  // namespace nvproxy::hooks
