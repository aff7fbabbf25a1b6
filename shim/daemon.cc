// The long-lived shim process: child subreaper, ttrpc Task service on the socket `start` passed
// as fd 3, events to containerd, logs into the bundle's `log` FIFO that containerd reads.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "common/error.h"
#include "common/log.h"
#include "shim/cli.h"
#include "shim/events.h"
#include "shim/reaper.h"
#include "shim/task/task_rpc.h"
#include "shim/task/gpu_checkpoint.h"
#include "shim/task/oom_watcher.h"
#include "shim/task/task_service.h"
#include "proto/events.pb.h"
#include "shim/ttrpc/server.h"
#include "shim/version.h"

namespace nvproxy::shim {

namespace {
// O_RDWR so the open never blocks, even when containerd has not attached its reader yet.
UniqueFd open_log_fifo() {
  UniqueFd fd(::open("log", O_RDWR | O_CLOEXEC | O_NONBLOCK));
  if (fd) ::fcntl(fd.get(), F_SETFL, 0);
  return fd;
}
}  // namespace

int daemon_main(const ShimArgs& a, const std::string& self_exe) {
  Reaper::block_sigchld();  // before any thread exists, so only the reaper sees SIGCHLD
  ::signal(SIGPIPE, SIG_IGN);
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) < 0) throw sys_error("prctl(PR_SET_CHILD_SUBREAPER)");

  UniqueFd log_fd = open_log_fifo();
  Logger log(log_fd ? log_fd.get() : 2, a.debug ? LogLevel::Debug : LogLevel::Info);
  log.set_field("namespace", a.ns);
  log.set_field("id", a.id);
  log.set_field("runtime", kRuntimeType);

  const char* ttrpc_addr = std::getenv("TTRPC_ADDRESS");
  EventPublisher events(ttrpc_addr ? ttrpc_addr : "", a.ns, log);

  std::atomic<TaskService*> svc_ptr{nullptr};
  Reaper reaper([&](pid_t pid, int status) {
    if (auto* s = svc_ptr.load()) s->on_exit(pid, status);
  });
  ProcessRunner runner(reaper);
  ttrpc::Server server(log);
  OomWatcher oom(log, [&](const std::string& id) {
    containerd::events::TaskOOM ev;
    ev.set_container_id(id);
    events.publish("/tasks/oom", ev);
  });
  GpuCheckpointHooks checkpoints(log, runner);
  TaskService svc(ServiceDeps{
      .ns = a.ns,
      .self_binary = self_exe,
      .log = log,
      .runner = runner,
      .events = events,
      .checkpoints = checkpoints,
      .oom = &oom,
      .make_runtime = [&](const oci::RuntimeConfig& rc,
                          const std::filesystem::path& log_file) { return std::make_unique<oci::Runtime>(rc, runner, log, log_file); },
      .load_config = [](const std::string& path) { return load_config(path); },
      .shutdown = [&] { server.shutdown(); }});
  svc_ptr = &svc;
  register_task_service(server, svc);

  // The listening socket arrives as fd 3; remember its path to remove it on the way out.
  sockaddr_un sa{};
  socklen_t len = sizeof sa;
  std::string sock_path;
  if (::getsockname(3, reinterpret_cast<sockaddr*>(&sa), &len) == 0 && sa.sun_path[0] != '\0') sock_path = sa.sun_path;
  server.serve(UniqueFd(3));
  log.info(std::string("shim ") + kVersion + " serving on " + sock_path);
  server.run(1);
  log.info("shim shutting down");
  if (!sock_path.empty()) ::unlink(sock_path.c_str());
  svc_ptr = nullptr;
  // Deliver the last events (TaskDelete), then leave without unwinding: a handler still blocked
  // (a Wait on a process that never exits) must not keep the shim alive.
  events.drain(std::chrono::seconds(5));
  std::fflush(nullptr);
  ::_exit(0);
}

}  // namespace nvproxy::shim
