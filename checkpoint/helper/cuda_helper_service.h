// nvproxy-cuda-helper's side of the "nvproxy.cuda.v1.Helper" service (cuda_helper_wire.h): its
// methods answered with a real toggler and GPU usage probe (the driver API and NVML in the helper
// program, fakes in tests). Each call runs on a ttrpc worker thread, so a lock that waits for the
// driver holds up no other call.
#pragma once

#include <functional>

#include "checkpoint/helper/thread_hold.h"
#include "checkpoint/shared/cuda_toggler.h"
#include "checkpoint/shared/gpu_usage.h"
#include "common/ttrpc/server.h"

namespace nvproxy::checkpoint {

// toggler and probe must outlive the server.
void register_cuda_helper_service(ttrpc::Server& server, CudaToggler& toggler, GpuUsageProbe& probe);

// Hold and Release (thread_hold.h). restore_tid_of: the driver's restore thread of a pid, 0 when it
// has none (not a CUDA process); asked before the pid is held. hold must outlive the server.
void register_hold_service(ttrpc::Server& server, ThreadHold& hold, std::function<pid_t(pid_t)> restore_tid_of);

}  // namespace nvproxy::checkpoint
