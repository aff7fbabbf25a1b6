// `containerd-shim-nvproxy-v1 diagnose`: shows which processes of a container hold GPU devices and
// their CUDA states, and whether a checkpoint would be refused, WITHOUT changing anything.
//
//   diagnose --id ID [--namespace NS] [--runtime-root DIR] [--runtime runc] [--pid PID...] [--json]
//            [--cuda driver-api|cuda-checkpoint|none] [--cuda-checkpoint-path P] [--libcuda LIB]
//            [--libnvml LIB] [--device-glob GLOB...] [--image-path DIR] [--content-store DIR]
//   diagnose --image DIR [--json]   the host files a checkpoint image needs (diagnose_image.h)
//
// This file reads the options and prints the answer; the answer itself comes from the caller,
// which runs the container's checkpoint session (the same assembly and decision a checkpoint
// uses) in inspect mode. Exit status: 0 a checkpoint would proceed, 3 it would be refused,
// 1 error, 2 bad usage.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "checkpoint/config.h"
#include "checkpoint/orchestrator/orchestrator.h"

namespace nvproxy::checkpoint {

struct DiagnoseRequest {
  CheckpointConfig cfg;
  std::string id;  // may be empty with pids
  std::string ns = "default";
  std::string runtime;  // the runtime binary; empty: the caller's choice (the bundle's record)
  std::string runtime_root;
  std::vector<pid_t> pids;  // inspect these instead of asking the runtime
  // Where containerd's client has the runtime write an image, and where containerd copies it
  // (empty: no copy): the space check asks about the same places.
  std::filesystem::path image_path;
  std::string content_store;
};

// Runs the inspection; throws Error (printed, exit status 1).
using Inspector = std::function<Inspection(const DiagnoseRequest&)>;

// args: the arguments after "diagnose".
int diagnose_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err, const Inspector& inspect);

}  // namespace nvproxy::checkpoint
