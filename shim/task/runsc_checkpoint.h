// The GPU checkpoint and restore of a container under runsc (gVisor): the same orchestrator as under
// runc (scan, classify, preflight, lock all, checkpoint all, verify, snapshot, resume or roll back),
// with every question asked inside the sandbox through nvproxy-sandbox-agent
// (checkpoint/sandbox_tools.h); the snapshot is `runsc checkpoint`, which saves the sandbox with
// its processes' CUDA state already checkpointed (no GPU file open, nothing of the device mapped).
#pragma once

#include "shim/task/checkpoint_flow.h"

namespace nvproxy::shim {

void run_sandbox_checkpoint(CheckpointTarget& c, const oci::CheckpointFlags& flags, bool paused, const CheckpointEnv& env);
// After `runsc restore`: restore + unlock CUDA in every sandbox process the image's record counts.
void restore_sandbox_cuda(CheckpointTarget& c, const CheckpointEnv& env);

}  // namespace nvproxy::shim
