#include "shim/task/task_shim.h"

#include "checkpoint/staging/limit_lift.h"
#include "common/error.h"
#include "shim/task/config.h"
#include "shim/task/gpu_checkpoint.h"
#include "shim/task/oom_watcher.h"
#include "shim/task/rootfs.h"
#include "shim/task/runsc_root.h"
#include "shim/task/runtime_locator.h"
#include "shim/task/task_events.h"
#include "shim/task/task_rpc.h"
#include "shim/task/task_service.h"

namespace nvproxy::shim {

namespace {

class TaskShim final : public ShimService {
 public:
  explicit TaskShim(DaemonContext& ctx)
      : oom_(ctx.log, [&events = ctx.events](const std::string& id) { TaskEvents(events, id).oom(); }),
        probe_(ctx.runner, ctx.log),
        checkpoints_(ctx.log, ctx.runner),
        svc_(ServiceDeps{.ns = ctx.args.ns,
                         .self_binary = ctx.self_exe,
                         .log = ctx.log,
                         .runner = ctx.runner,
                         .events = ctx.events,
                         .checkpoints = checkpoints_,
                         .oom = &oom_,
                         .make_runtime =
                             [&ctx, this](const oci::RuntimeConfig& rc, const std::filesystem::path& log_file) {
                               return std::make_unique<oci::Runtime>(rc, ctx.runner, ctx.log, log_file, &probe_);
                             },
                         .load_config = [](const std::string& path) { return load_config(path); },
                         .shutdown = ctx.shutdown}) {
    register_task_service(ctx.server, svc_);
  }
  void on_exit(pid_t pid, int wait_status) override { svc_.on_exit(pid, wait_status); }

 private:
  OomWatcher oom_;
  oci::RuntimeProbe probe_;  // what the runtime and CRIU binaries are, learnt once per shim
  GpuCheckpointHooks checkpoints_;
  TaskService svc_;
};

}  // namespace

std::unique_ptr<ShimService> make_task_shim(DaemonContext& ctx) {
  return std::make_unique<TaskShim>(ctx);
}

void cleanup_dead_task(const ShimArgs& a, const std::filesystem::path& bundle) {
  Logger log(2);
  DirectWaiter waiter;
  ProcessRunner runner(waiter);
  oci::RuntimeConfig rc = locate_runtime(bundle, a.ns);
  oci::Runtime rt(rc, runner, log, bundle / "log.json");
  try {
    rt.remove(a.id, true);
  } catch (const Error& e) {
    if (e.code() != Code::NotFound) log.warn(std::string("delete: ") + e.what());
  }
  remove_runsc_sandbox_root(rc, a.id);
  // A shim that died while memory limits were lifted for the driver's staging left their
  // originals in the bundle: a pod's limit outlives the container.
  checkpoint::HostMemoryProbe memory;
  checkpoint::put_back_recorded(memory, bundle / checkpoint::kLiftRecordFile, log, "delete of \"" + a.id + "\"");
  unmount_all(bundle / "rootfs");
}

}  // namespace nvproxy::shim
