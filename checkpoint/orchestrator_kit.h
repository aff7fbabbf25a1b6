// The one way to build an Orchestrator with its real tools, for the shim's checkpoint and restore
// and for `diagnose`: the device-holder scan of the configured globs, CUDA through
// nvproxy-cuda-helper (or the cuda-checkpoint binary), the helper's GPU probe, the collective probe.
// Tests build the Orchestrator directly with fakes.
#pragma once

#include <memory>

#include "checkpoint/comm_probe.h"
#include "checkpoint/config.h"
#include "checkpoint/cuda_helper_client.h"
#include "checkpoint/file_identity.h"
#include "checkpoint/holder_scan.h"
#include "checkpoint/orchestrator.h"
#include "checkpoint/process_list.h"
#include "common/log.h"
#include "common/process.h"

namespace nvproxy::checkpoint {

struct OrchestratorKit {
  OrchestratorKit(const CheckpointConfig& cfg, std::unique_ptr<ProcessLister> lister, ProcessRunner& runner, Logger& log);
  OrchestratorKit(const OrchestratorKit&) = delete;
  OrchestratorKit& operator=(const OrchestratorKit&) = delete;

  std::unique_ptr<ProcessLister> lister;
  ProcHolderScanner scanner;
  CudaTools cuda;  // toggler and probe, through one nvproxy-cuda-helper started on first use
  ProcCommProbe comm;
  KcmpFileIdentity files;
  Orchestrator orch;  // last: it refers to the tools above
};

}  // namespace nvproxy::checkpoint
