#include "checkpoint/report/hints.h"

namespace nvproxy::checkpoint {

namespace {
std::string P(pid_t pid) {
  return "pid " + std::to_string(pid);
}
}  // namespace

std::string hint_not_cuda(const ProcInfo& p, const ProcInfo* cuda_parent, const std::string& device, const std::string& answer) {
  // Forked without exec: same program and same command line as the CUDA parent (a child started with
  // exec, e.g. multiprocessing's 'spawn', runs the same python but with another command line).
  if (cuda_parent && !p.exe.empty() && p.exe == cuda_parent->exe && p.cmdline == cuda_parent->cmdline)
    return P(p.pid) + " was forked from CUDA process " + std::to_string(cuda_parent->pid) +
           " without exec and inherited its GPU device files (" + device +
           "); the driver cannot checkpoint it: start children with exec (e.g. multiprocessing start method "
           "'spawn') or close the inherited fds";
  if (p.maps_libcuda)
    return P(p.pid) + " has libcuda loaded and holds " + device + ", but the driver reports no CUDA state for it (" + answer +
           "); stop it or exclude it before checkpointing";
  return P(p.pid) + " is not a CUDA process (NVML user?); stop it or exclude it before checkpointing";
}

std::string hint_wrong_state(pid_t pid, CudaState s) {
  return P(pid) + " is already CUDA-" + std::string(state_name(s)) +
         " (another checkpoint in progress, or one left stuck?); bring it back to running before checkpointing";
}

std::string hint_multi_gpu(pid_t pid, const std::set<std::string>& gpus) {
  std::string list;
  for (const auto& g : gpus) list += (list.empty() ? "" : ", ") + g;
  return P(pid) + " has CUDA contexts on " + std::to_string(gpus.size()) + " GPUs (" + list +
         "); the driver checkpoints such a process but cannot restore it, which would strand it; set "
         "checkpoint.allow_unrestorable to checkpoint anyway";
}

std::string hint_collective(pid_t pid, const std::vector<std::string>& evidence) {
  std::string ev;
  for (size_t i = 0; i < evidence.size() && i < 3; ++i) ev += (ev.empty() ? "" : "; ") + evidence[i];
  if (evidence.size() > 3) ev += "; +" + std::to_string(evidence.size() - 3) + " more";
  return P(pid) + " is a rank of a collective (NCCL) with other CUDA processes (" + ev +
         "); the driver checkpoints NCCL ranks but cannot restore them, which would strand them; set "
         "checkpoint.allow_unrestorable to checkpoint anyway";
}

std::string hint_toggle_failed(const CudaError& e, unsigned lock_timeout_ms) {
  std::string s = "CUDA " + e.op() + " of " + P(e.pid()) + " failed: " + e.answer();
  if (e.op() == "lock" && e.driver_code() == kCudaTimeout)
    s += "; it did not reach a lockable point within lock_timeout_ms=" + std::to_string(lock_timeout_ms) +
         " (a long-running kernel?): retry, or raise checkpoint.lock_timeout_ms";
  return s;
}

std::string hint_still_holds(pid_t pid, const std::string& state, const std::string& device, bool toggled, bool known) {
  if (!known) return P(pid) + " started during the checkpoint and holds " + device + "; retry the checkpoint";
  if (toggled)
    return P(pid) + " is CUDA-" + state + " but still holds " + device +
           ": the driver did not release it (a device outside CUDA's checkpoint, e.g. /dev/dri, or a "
           "driver without full checkpoint support?)";
  return P(pid) + " holds " + device + " and was not toggled; stop it or exclude it before checkpointing";
}

}  // namespace nvproxy::checkpoint
