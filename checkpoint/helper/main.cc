// nvproxy-cuda-helper: loads the CUDA driver (and NVML) on behalf of the static shim and serves the
// ttrpc service "nvproxy.cuda.v1.Helper" (proto/cuda_helper.proto) on its stdin, one end of a
// socketpair whose other end the shim holds. Started by the shim for a checkpoint or restore, it
// exits when the shim hangs up.
//
//   nvproxy-cuda-helper [--libcuda PATH] [--libnvml PATH]
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <string>

#include "checkpoint/driver/cuda_driver_api.h"
#include "checkpoint/helper/cuda_helper_service.h"
#include "checkpoint/helper/held_toggler.h"
#include "checkpoint/helper/thread_hold.h"
#include "checkpoint/shared/gpu_usage.h"
#include "common/log.h"
#include "common/ttrpc/server.h"
#include "common/unique_fd.h"

int main(int argc, char** argv) {
  std::string libcuda = "libcuda.so.1", libnvml = "libnvidia-ml.so.1";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "--libcuda" || a == "--libnvml") && i + 1 < argc) {
      (a == "--libcuda" ? libcuda : libnvml) = argv[++i];
    } else if (a == "-h" || a == "--help") {
      std::cout << "usage: nvproxy-cuda-helper [--libcuda PATH] [--libnvml PATH]\n"
                   "Serves containerd-shim-nvproxy-v1's CUDA calls (ttrpc) on stdin, a socket; not for direct use.\n";
      return 0;
    } else {
      std::cerr << "nvproxy-cuda-helper: unknown argument \"" << a << "\"\n";
      return 2;
    }
  }
  // The socket moves off fd 0 (nothing else may read it) and out of any child the driver starts.
  nvproxy::UniqueFd conn(::fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3));
  int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (!conn || devnull < 0 || ::dup2(devnull, STDIN_FILENO) < 0) {
    std::cerr << "nvproxy-cuda-helper: cannot take the socket off stdin: " << std::strerror(errno) << "\n";
    return 1;
  }
  ::close(devnull);
  nvproxy::Logger log(STDERR_FILENO, nvproxy::LogLevel::Warn);
  nvproxy::checkpoint::DriverApiToggler driver(libcuda);
  nvproxy::checkpoint::NvmlGpuUsageProbe probe(libnvml);
  try {
    // Declared before the server: the holds are let go after the last call has ended.
    nvproxy::checkpoint::ThreadHold hold;
    nvproxy::checkpoint::HeldToggler toggler(driver, hold, [&driver](pid_t pid) -> pid_t {
      try {
        return driver.restore_thread_id(pid).value_or(0);
      } catch (const std::exception&) {
        return 0;  // not a CUDA process (NOT_INITIALIZED): all its threads are held
      }
    });
    nvproxy::ttrpc::Server server(log, {.require_same_user = false, .stop_when_disconnected = true});
    nvproxy::checkpoint::register_cuda_helper_service(server, toggler, probe);
    nvproxy::checkpoint::register_hold_service(server, hold, [&toggler](pid_t pid) { return toggler.restore_tid(pid); });
    server.serve_connection(std::move(conn));
    server.run();
  } catch (const std::exception& e) {
    std::cerr << "nvproxy-cuda-helper: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
