#include "shim/kit/cli.h"

#include <boost/program_options.hpp>
#include <sstream>

#include "common/error.h"

namespace nvproxy::shim {

namespace po = boost::program_options;

namespace {
po::options_description shim_options(ShimArgs& a) {
  po::options_description d("containerd shim flags (also accepted with one dash, as containerd passes them)");
  d.add_options()("namespace", po::value(&a.ns), "containerd namespace")("id", po::value(&a.id), "container (or sandbox) id")(
      "address", po::value(&a.address), "containerd's grpc address")(
      "publish-binary", po::value(&a.publish_binary), "containerd binary used to publish events (unused: events go over ttrpc)")(
      "bundle", po::value(&a.bundle), "bundle path (delete)")("socket", po::value<std::string>(), "ignored (compatibility)")(
      "debug", po::bool_switch(&a.debug), "debug logging")("version,v", po::bool_switch(&a.version), "print the version")(
      "info", po::bool_switch(&a.info), "read runtime options on stdin, print the runtime info protobuf (containerd 2.x)")(
      "help,h", po::bool_switch(&a.help), "this help")("action", po::value(&a.action), "start | delete");
  return d;
}
}  // namespace

ShimArgs parse_shim_args(const std::vector<std::string>& args) {
  ShimArgs a;
  auto desc = shim_options(a);
  po::positional_options_description pos;
  pos.add("action", 1);
  try {
    po::variables_map vm;
    po::store(po::command_line_parser(args)
                  .options(desc)
                  .positional(pos)
                  .style(po::command_line_style::unix_style | po::command_line_style::allow_long_disguise)
                  .run(),
              vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw Error(Code::InvalidArgument, std::string(e.what()) + " (see --help)");
  }
  if (!a.action.empty() && a.action != "start" && a.action != "delete")
    throw Error(Code::InvalidArgument,
                "unknown action \"" + a.action + "\" (start, delete, gpu-spec, diagnose, image, configure, doctor, hook)");
  return a;
}

std::string shim_usage() {
  ShimArgs a;
  std::ostringstream os;
  os << "Usage: containerd-shim-nvproxy-v1 [flags] start|delete\n"
        "       containerd-shim-nvproxy-v1 gpu-spec --help\n"
        "       containerd-shim-nvproxy-v1 diagnose --help\n"
        "       containerd-shim-nvproxy-v1 configure containerd|docker|kubernetes --help   (wire this node)\n"
        "       containerd-shim-nvproxy-v1 doctor [--json]   (can this node checkpoint GPU containers?)\n"
        "       containerd-shim-nvproxy-v1 hook NAME   (OCI hook mode, state JSON on stdin)\n\n"
        "containerd runtime shim (runtime type io.containerd.nvproxy.v1) that injects NVIDIA GPUs into\n"
        "containers and checkpoints CUDA processes with them.\n\n"
     << shim_options(a);
  return os.str();
}

}  // namespace nvproxy::shim
