// `containerd-shim-nvproxy-v1 diagnose`: checkpoint/diagnose/diagnose.h's report, pointed at the runtime the
// container was created with (runtime_locator.h: the record in its bundle, else the config), so it
// looks where the shim looks. --bundle DIR names the bundle (default: containerd's task directory
// for --namespace and --id); --runtime and --runtime-root still override.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace nvproxy::shim {

int diagnose_cmd(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace nvproxy::shim
