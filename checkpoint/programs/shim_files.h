// Where the shim's companion files are (nvproxy-cuda-helper, nvproxy-sandbox-agent, the CRIU
// release plugin): beside the running binary (the build tree), then in
// ../libexec/containerd-shim-nvproxy/ (the packaged layout: /usr/bin + /usr/libexec).
#pragma once

#include <string>

namespace nvproxy::checkpoint {

inline constexpr const char* kPackagedLibexecDir = "/usr/libexec/containerd-shim-nvproxy";

// `name` (relative to those directories) in the first of them where access(2) grants `mode`;
// empty when in neither.
std::string find_beside_shim(const std::string& name, int mode);

}  // namespace nvproxy::checkpoint
