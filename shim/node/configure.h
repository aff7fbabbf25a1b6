// `containerd-shim-nvproxy-v1 configure containerd|docker|kubernetes`: wires this runtime into a
// node's containerd (CRI) or Docker configuration, or prints Kubernetes' RuntimeClass. Each edits
// the files as data (TOML, JSON), keeps every other setting and the original beside the file, and
// changes nothing when the runtime is already there.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "common/process.h"

namespace nvproxy::node {

// Exit codes: 0 done (or nothing to change), 1 refused (nothing written), 2 usage.
int configure_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

int configure_containerd(const std::vector<std::string>& args, std::ostream& out, std::ostream& err, ProcessRunner& runner);
int configure_docker(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int configure_kubernetes(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace nvproxy::node
