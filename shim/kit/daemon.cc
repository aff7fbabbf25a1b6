#include "shim/kit/daemon.h"

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
#include "common/ttrpc/server.h"
#include "shim/kit/cli.h"
#include "shim/kit/events.h"
#include "shim/kit/protobuf_log.h"
#include "shim/kit/reaper.h"
#include "shim/kit/version.h"

namespace nvproxy::shim {

namespace {
// O_RDWR so the open never blocks, even when containerd has not attached its reader yet.
UniqueFd open_log_fifo() {
  UniqueFd fd(::open("log", O_RDWR | O_CLOEXEC | O_NONBLOCK));
  if (fd) ::fcntl(fd.get(), F_SETFL, 0);
  return fd;
}
}  // namespace

int daemon_main(const ShimArgs& a, const std::string& self_exe, const ServiceFactory& make_service) {
  Reaper::block_sigchld();  // before any thread exists, so only the reaper sees SIGCHLD
  ::signal(SIGPIPE, SIG_IGN);
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) < 0) throw sys_error("prctl(PR_SET_CHILD_SUBREAPER)");

  UniqueFd log_fd = open_log_fifo();
  Logger log(log_fd ? log_fd.get() : 2, a.debug ? LogLevel::Debug : LogLevel::Info);
  log.set_field("namespace", a.ns);
  log.set_field("id", a.id);
  log.set_field("runtime", kRuntimeType);
  route_protobuf_log(&log);  // never returns: log outlives every thread that parses

  const char* ttrpc_addr = std::getenv("TTRPC_ADDRESS");
  EventPublisher events(ttrpc_addr ? ttrpc_addr : "", a.ns, log);

  std::atomic<ShimService*> svc_ptr{nullptr};
  Reaper reaper([&](pid_t pid, int status) {
    if (auto* s = svc_ptr.load()) s->on_exit(pid, status);
  });
  ProcessRunner runner(reaper);
  ttrpc::Server server(log);
  DaemonContext ctx{a, self_exe, log, runner, events, server, [&] { server.shutdown(); }};
  std::unique_ptr<ShimService> svc = make_service(ctx);
  svc_ptr = svc.get();

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
