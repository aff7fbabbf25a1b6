// nvproxy-cuda-helper: loads the CUDA driver (and NVML) on behalf of the static shim and answers
// its requests on stdin/stdout (cuda_helper_protocol.h). Started by the shim for a checkpoint or
// restore, it exits when the shim closes its stdin.
//
//   nvproxy-cuda-helper [--libcuda PATH] [--libnvml PATH]
#include <unistd.h>

#include <cstring>
#include <iostream>
#include <string>

#include "checkpoint/cuda_driver_api.h"
#include "checkpoint/cuda_helper_server.h"
#include "checkpoint/gpu_usage.h"

int main(int argc, char** argv) {
  std::string libcuda = "libcuda.so.1", libnvml = "libnvidia-ml.so.1";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "--libcuda" || a == "--libnvml") && i + 1 < argc) {
      (a == "--libcuda" ? libcuda : libnvml) = argv[++i];
    } else if (a == "-h" || a == "--help") {
      std::cout << "usage: nvproxy-cuda-helper [--libcuda PATH] [--libnvml PATH]\n"
                   "Serves containerd-shim-nvproxy-v1's CUDA requests on stdin/stdout; not for direct use.\n";
      return 0;
    } else {
      std::cerr << "nvproxy-cuda-helper: unknown argument \"" << a << "\"\n";
      return 2;
    }
  }
  // The answers get their own fd; anything the driver libraries print goes to stderr, so that it
  // cannot corrupt the protocol.
  int proto_out = ::dup(STDOUT_FILENO);
  if (proto_out < 0 || ::dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
    std::cerr << "nvproxy-cuda-helper: cannot set up stdout: " << std::strerror(errno) << "\n";
    return 1;
  }
  nvproxy::checkpoint::DriverApiToggler toggler(libcuda);
  nvproxy::checkpoint::NvmlGpuUsageProbe probe(libnvml);
  return nvproxy::checkpoint::serve_cuda_helper(STDIN_FILENO, proto_out, toggler, probe);
}
