// What crosses the socketpair between the shim and nvproxy-cuda-helper: the ttrpc service
// "nvproxy.cuda.v1.Helper" (proto/cuda_helper.proto) and the conversions between its messages and
// the checkpoint module's types. The same ttrpc code serves containerd's Task API, so the helper's
// calls get the shim's framing, deadlines, concurrency and failure handling, not a second protocol.
#pragma once

#include "checkpoint/facts/gpu_facts.h"
#include "checkpoint/shared/cuda_toggler.h"
#include "common/ttrpc/status_error.h"
#include "proto/cuda_helper.pb.h"

namespace nvproxy::checkpoint::helper_wire {

inline constexpr const char* kService = "nvproxy.cuda.v1.Helper";
inline constexpr const char* kCudaFailureType = "type.googleapis.com/nvproxy.cuda.v1.CudaFailure";

// A driver refusal as a status with a CudaFailure detail, and back. rethrow() throws the CudaError
// a detail describes, else the StatusError itself (its code and message as the helper sent them).
ttrpc::StatusError to_status(const CudaError& e);
[[noreturn]] void rethrow(const ttrpc::StatusError& e);

// Throws Error(Internal) for a state this shim does not know.
CudaState state_from_wire(int state);
nvproxy::cuda::v1::CudaState state_to_wire(CudaState s);

nvproxy::cuda::v1::HostFacts to_wire(const GpuHostFacts& f);
GpuHostFacts from_wire(const nvproxy::cuda::v1::HostFacts& m);

}  // namespace nvproxy::checkpoint::helper_wire
