// The shim's command line as containerd invokes it (Go flag syntax: -namespace NS -id ID ...),
// and the three entry points: start, delete, and the daemon (no action).
#pragma once

#include <filesystem>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

namespace nvproxy::shim {

struct ShimArgs {
  std::string ns;
  std::string id;
  std::string address;         // containerd's grpc address
  std::string publish_binary;  // containerd binary (events via ttrpc are used instead)
  std::string bundle;
  bool debug = false;
  bool version = false;
  bool info = false;  // -info: containerd 2.x asks for the runtime's info (introspection)
  bool help = false;
  std::string action;  // "start", "delete" or "" (daemon)
};

// Throws Error(InvalidArgument) for unknown flags or missing values.
ShimArgs parse_shim_args(const std::vector<std::string>& args);
std::string shim_usage();

int start_main(const ShimArgs& a, const std::string& self_exe, std::istream& in, std::ostream& out);
// `delete`: runs `cleanup` (the product's: runtime delete, unmount) for the bundle, removes a dead
// shim's socket and prints the DeleteResponse containerd expects.
using DeadShimCleanup = std::function<void(const ShimArgs& a, const std::filesystem::path& bundle)>;
int delete_main(const ShimArgs& a, std::ostream& out, const DeadShimCleanup& cleanup);

}  // namespace nvproxy::shim
