#include "checkpoint/orchestrator_kit.h"

namespace nvproxy::checkpoint {

OrchestratorKit::OrchestratorKit(const CheckpointConfig& cfg, std::unique_ptr<ProcessLister> l, ProcessRunner& runner,
                                 Logger& log)
    : lister(std::move(l)),
      scanner(cfg.device_globs),
      cuda(make_cuda_tools(cfg, runner)),
      orch(cfg, *lister, scanner, cuda.toggler.get(), cuda.probe.get(), log) {
  orch.set_comm_probe(&comm);
  orch.set_file_identity(&files);
  // On the host, forked children's inherited device files are released by CRIU with the shim's
  // plugin (release.h); the session takes it back where the runtime has no CRIU.
  orch.set_release(release_plugin_problem(criu_plugin_dir(cfg)));
}

}  // namespace nvproxy::checkpoint
