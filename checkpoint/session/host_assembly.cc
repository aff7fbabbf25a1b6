#include "checkpoint/session/host_assembly.h"

#include <cstdlib>

#include "checkpoint/attempt/release.h"

namespace nvproxy::checkpoint {

HostEnvironment HostEnvironment::current() {
  const char* path = std::getenv("PATH");
  return {.kernel = kernel_release(), .path = path ? path : ""};
}

HostAssembly::HostAssembly(const CheckpointConfig& cfg, SessionRuntime& rt, bool list_processes, ProcessRunner& runner,
                           Logger& log, const HostEnvironment& env)
    : lister_([&rt, list_processes] { return list_processes ? rt.ps() : std::vector<pid_t>{}; }),
      scanner_(cfg.device_globs),
      cuda_(make_cuda_tools(cfg, runner)),
      memory_(cfg.host_meminfo),
      reservations_(cfg.staging_account) {
  OrchestratorTools t{.lister = &lister_,
                      .scanner = &scanner_,
                      .toggler = cuda_.toggler.get(),
                      .probe = cuda_.probe.get(),
                      .comm = &comm_,
                      .space = &space_,
                      .holds = &holds_,
                      .files = &files_,
                      // Forked children's inherited device files are left out of the image by
                      // CRIU with the shim's plugin (release.h).
                      .release_unavailable = release_plugin_problem(criu_plugin_dir(cfg)),
                      .memory = &memory_,
                      .reservations = &reservations_};
  // The helper toggles and holds alike: it is the tracer that lets a restore thread run.
  if (cfg.hold_still && cfg.cuda == "driver-api" && cuda_.helper) {
    hold_.emplace(
        cuda_.helper, [&rt] { rt.pause(); }, [&rt] { rt.resume(); });
    t.hold = &*hold_;
  } else if (cfg.hold_still) {
    t.hold_unavailable =
        cfg.cuda != "driver-api" ? "checkpoint.cuda is \"" + cfg.cuda + "\", not driver-api" : "no nvproxy-cuda-helper";
  }
  if (auto criu = rt.criu()) {
    criu_.emplace(criu->binary, criu->version, env.kernel);
    const bool tcp = criu->tcp_established || has_criu_option(criu->options, "tcp-established");
    net_lock_.emplace(criu->options, env.path, tcp);
    tcp_.emplace(tcp);
    checks_.add(&*criu_);
    checks_.add(&io_uring_);
    checks_.add(&*net_lock_);
    checks_.add(&*tcp_);
    t.snapshot_check = &checks_;
  } else {
    t.release_unavailable = "the runtime has no CRIU to leave them out of its image";
  }
  orch_.emplace(cfg, t, log);
}

}  // namespace nvproxy::checkpoint
