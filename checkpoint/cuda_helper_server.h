// nvproxy-cuda-helper's side of the protocol (cuda_helper_protocol.h): answers requests with a real
// toggler and GPU usage probe (the driver API and NVML in the helper program, fakes in tests).
#pragma once

#include <nlohmann/json.hpp>

#include "checkpoint/cuda_toggler.h"
#include "checkpoint/gpu_usage.h"

namespace nvproxy::checkpoint {

// One request -> its answer (never throws: errors become {"ok": false, "error": ...}).
nlohmann::json handle_helper_request(const nlohmann::json& request, CudaToggler& toggler, GpuUsageProbe& probe);

// Reads requests from in_fd until EOF, each served on its own thread, answers written to out_fd
// one line at a time. Returns when every request has been answered; 0, or 1 if out_fd failed.
int serve_cuda_helper(int in_fd, int out_fd, CudaToggler& toggler, GpuUsageProbe& probe);

}  // namespace nvproxy::checkpoint
