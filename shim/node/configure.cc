#include <iostream>

#include "shim/node/configure.h"

namespace nvproxy::node {

int configure_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  const char* usage =
      "Usage: containerd-shim-nvproxy-v1 configure containerd|docker|kubernetes [--help | flags]\n"
      "  containerd   add the runtime to containerd's CRI config (Kubernetes, crictl)\n"
      "  docker       add the runtimes to Docker's daemon.json\n"
      "  kubernetes   print the RuntimeClass\n";
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    (args.empty() ? err : out) << usage;
    return args.empty() ? 2 : 0;
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args[0] == "containerd") {
    DirectWaiter waiter;
    ProcessRunner runner(waiter);
    return configure_containerd(rest, out, err, runner);
  }
  if (args[0] == "docker") return configure_docker(rest, out, err);
  if (args[0] == "kubernetes") return configure_kubernetes(rest, out, err);
  err << "configure: unknown target \"" << args[0] << "\"\n" << usage;
  return 2;
}

}  // namespace nvproxy::node
