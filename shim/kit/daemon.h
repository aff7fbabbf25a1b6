// The long-lived shim process, generic over what it serves: child subreaper, ttrpc server on the
// socket `start` passed as fd 3, events to containerd, logs into the bundle's `log` FIFO. The
// service (the task layer) is built by a factory once this machinery is up.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>

#include "common/log.h"
#include "common/process.h"
#include "common/ttrpc/server.h"
#include "shim/kit/cli.h"
#include "shim/kit/events.h"

namespace nvproxy::shim {

// What the daemon offers the service it hosts.
struct DaemonContext {
  const ShimArgs& args;
  const std::string& self_exe;
  Logger& log;
  ProcessRunner& runner;  // runs programs; their exits never reach the service
  EventPublisher& events;
  ttrpc::Server& server;           // register methods here
  std::function<void()> shutdown;  // ends the daemon
};

class ShimService {
 public:
  virtual ~ShimService() = default;
  // Every exit of a child the shim did not start as a command (container processes, orphans).
  virtual void on_exit(pid_t pid, int wait_status) = 0;
};

using ServiceFactory = std::function<std::unique_ptr<ShimService>(DaemonContext& ctx)>;

int daemon_main(const ShimArgs& a, const std::string& self_exe, const ServiceFactory& make_service);

}  // namespace nvproxy::shim
