// containerd-shim-nvproxy-v1: dispatches containerd's actions (start, delete, daemon) and the
// operator commands (gpu-spec, diagnose, image, configure, doctor) and the OCI hook mode.
#include <malloc.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/text.h"
#include "gpu/gpu_spec_cmd.h"
#include "hooks/hook_main.h"
#include "shim/kit/cli.h"
#include "shim/kit/daemon.h"
#include "shim/kit/version.h"
#include "shim/node/configure.h"
#include "shim/node/doctor.h"
#include "shim/task/diagnose_cmd.h"
#include "shim/task/image_cmd.h"
#include "shim/task/info_cmd.h"
#include "shim/task/task_shim.h"

namespace {
std::string self_exe(const char* argv0) {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(argv0) : p.string();
}
}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  using namespace nvproxy;
  try {
    if (!args.empty()) {
      std::vector<std::string> rest(args.begin() + 1, args.end());
      if (args[0] == "gpu-spec") return gpu::gpu_spec_main(rest, std::cout, std::cerr);
      if (args[0] == "diagnose") return shim::diagnose_cmd(rest, std::cout, std::cerr);
      if (args[0] == "image") return shim::image_cmd(rest, std::cout, std::cerr);
      if (args[0] == "hook") return hooks::hook_main(rest, std::cin, std::cerr);
      if (args[0] == "configure") return node::configure_main(rest, std::cout, std::cerr);
      if (args[0] == "doctor") return node::doctor_main(rest, std::cout, std::cerr);
    }
    shim::ShimArgs a = shim::parse_shim_args(args);
    if (a.help) {
      std::cout << shim::shim_usage();
      return 0;
    }
    if (a.version) {
      std::cout << shim::kBinaryName << ":\n  Version:  " << shim::kVersion << "\n  Runtime:  " << shim::kRuntimeType << "\n";
      return 0;
    }
    if (a.info) return shim::info_main(std::cin, std::cout);
    if (a.action == "start") return shim::start_main(a, self_exe(argv[0]), std::cin, std::cout);
    if (a.action == "delete") return shim::delete_main(a, std::cout, shim::cleanup_dead_task);
    if (a.id.empty() || a.ns.empty()) {
      std::cerr << "error: -namespace and -id are required\n" << shim::shim_usage();
      return 2;
    }
    // One daemon runs per container and is mostly idle: one malloc arena for all its threads
    // instead of one per thread (each touches its own pages) keeps its memory small.
    ::mallopt(M_ARENA_MAX, 1);
    return shim::daemon_main(a, self_exe(argv[0]), shim::make_task_shim);
  } catch (...) {
    // Every verb (diagnose, gpu-spec, image, start, delete) ends here on failure: one message,
    // valid UTF-8, with a code for what the standard library threw.
    const Error e = error_from_current_exception("internal error");
    std::cerr << "containerd-shim-nvproxy-v1: " << valid_utf8(e.what()) << "\n";
    return 1;
  }
}
