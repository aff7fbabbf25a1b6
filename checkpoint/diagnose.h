// `containerd-shim-nvproxy-v1 diagnose`: shows which processes of a container hold GPU devices and
// their CUDA states, and whether a checkpoint would be refused, WITHOUT changing anything.
//
//   diagnose --id ID [--namespace NS] [--runtime-root DIR] [--runtime runc] [--pid PID...] [--json]
//            [--cuda driver-api|cuda-checkpoint|none] [--cuda-checkpoint-path P] [--libcuda LIB]
//            [--libnvml LIB] [--device-glob GLOB...]
//
// Pids come from `RUNTIME [--root DIR] ps --format json ID` (the shim's `diagnose` fills RUNTIME and
// DIR from the container's bundle, where Create recorded them), or from --pid. Exit status: 0 a checkpoint would
// proceed, 3 it would be refused, 1 error, 2 bad usage.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace nvproxy::checkpoint {

// args: the arguments after "diagnose".
int diagnose_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace nvproxy::checkpoint
