#include "shim/task/diagnose_cmd.h"

#include "checkpoint/diagnose.h"
#include "shim/task/runtime_locator.h"

namespace nvproxy::shim {

namespace {

// The value of `--name V` or `--name=V`; empty when absent.
std::string flag_value(const std::vector<std::string>& args, const std::string& name) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == name && i + 1 < args.size()) return args[i + 1];
    if (args[i].rfind(name + "=", 0) == 0) return args[i].substr(name.size() + 1);
  }
  return "";
}

}  // namespace

int diagnose_cmd(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::vector<std::string> rest;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--bundle") {
      ++i;
      continue;
    }
    if (args[i].rfind("--bundle=", 0) == 0) continue;
    rest.push_back(args[i]);
  }
  std::string id = flag_value(args, "--id");
  bool given = !flag_value(args, "--runtime").empty() || !flag_value(args, "--runtime-root").empty();
  if (!id.empty() && !given) {
    std::string ns = flag_value(args, "--namespace");
    if (ns.empty()) ns = "default";
    std::string bundle = flag_value(args, "--bundle");
    auto rc = locate_runtime(bundle.empty() ? default_bundle(ns, id) : std::filesystem::path(bundle), ns);
    rest.insert(rest.end(), {"--runtime", rc.binary});
    if (!rc.root.empty()) rest.insert(rest.end(), {"--runtime-root", rc.root});
  }
  return checkpoint::diagnose_main(rest, out, err);
}

}  // namespace nvproxy::shim
