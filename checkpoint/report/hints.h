// One-sentence hints for the diagnostic: why a process blocks a checkpoint and what to do about it.
#pragma once

#include <sys/types.h>

#include <set>
#include <string>
#include <vector>

#include "checkpoint/shared/cuda_toggler.h"
#include "checkpoint/shared/holder_scan.h"

namespace nvproxy::checkpoint {

// A holder whose CUDA state cannot be read. parent: its parent's info when the parent is a CUDA
// process (nullptr otherwise); answer: what GetState said.
std::string hint_not_cuda(const ProcInfo& p, const ProcInfo* cuda_parent, const std::string& device, const std::string& answer);
std::string hint_wrong_state(pid_t pid, CudaState s);
std::string hint_multi_gpu(pid_t pid, const std::set<std::string>& gpus);
// A process the comm probe found talking to other CUDA processes as a collective's rank.
std::string hint_collective(pid_t pid, const std::vector<std::string>& evidence);
std::string hint_toggle_failed(const CudaError& e, unsigned lock_timeout_ms);
// A holder found by the verify scan. toggled: we checkpointed it; known: it was in the first scan.
std::string hint_still_holds(pid_t pid, const std::string& state, const std::string& device, bool toggled, bool known);

}  // namespace nvproxy::checkpoint
