#include "shim/task/diagnose_cmd.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "checkpoint/diagnose.h"
#include "checkpoint/diagnostic.h"
#include "checkpoint/sandbox_tools.h"
#include "shim/task/runtime_locator.h"
#include "shim/task/sandbox_target.h"

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

// Every value of a repeatable `--name V` / `--name=V`.
std::vector<std::string> flag_values(const std::vector<std::string>& args, const std::string& name) {
  std::vector<std::string> v;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == name && i + 1 < args.size()) v.push_back(args[i + 1]);
    if (args[i].rfind(name + "=", 0) == 0) v.push_back(args[i].substr(name.size() + 1));
  }
  return v;
}

// Under runsc the container's processes are seen from inside the sandbox (checkpoint/sandbox_tools.h):
// the same inspection as a checkpoint's preflight, with sandbox pids.
int diagnose_in_sandbox(const std::string& id, const oci::RuntimeConfig& rc, const std::filesystem::path& bundle,
                        const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  try {
    checkpoint::CheckpointConfig cfg;
    if (auto globs = flag_values(args, "--device-glob"); !globs.empty()) cfg.device_globs = globs;
    checkpoint::SandboxTarget t = sandbox_target(rc, id, bundle);
    DirectWaiter waiter;
    ProcessRunner runner(waiter);
    Logger log(-1);
    checkpoint::SandboxKit kit(cfg, t, runner, log);
    checkpoint::Inspection ins = kit.orch.inspect(id);
    if (std::find(args.begin(), args.end(), "--json") != args.end()) {
      auto j = checkpoint::to_json(ins.diagnostic);
      j["would_refuse"] = ins.would_refuse;
      j["sandbox"] = "runsc";
      out << j.dump(2) << "\n";
    } else {
      out << "(runsc sandbox: pids are the sandbox's own)\n" << checkpoint::render_text(ins.diagnostic);
    }
    return ins.would_refuse ? 3 : 0;
  } catch (const std::exception& e) {
    err << "error: " << e.what() << "\n";
    return 1;
  }
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
  std::string runtime = flag_value(args, "--runtime"), root = flag_value(args, "--runtime-root");
  if (!id.empty() && (runtime.empty() || root.empty())) {
    // What the operator did not name comes from the bundle's record of what Create chose.
    std::string ns = flag_value(args, "--namespace");
    if (ns.empty()) ns = "default";
    std::string bundle = flag_value(args, "--bundle");
    std::filesystem::path b = bundle.empty() ? default_bundle(ns, id) : std::filesystem::path(bundle);
    auto rc = locate_runtime(b, ns);
    if (!runtime.empty() && runtime != rc.binary) rc.root.clear();  // another runtime: its own default root
    if (!runtime.empty()) rc.binary = runtime;
    if (!root.empty()) rc.root = root;
    if (oci::runtime_kind_from_binary(rc.binary) == oci::RuntimeKind::Runsc && flag_value(args, "--pid").empty())
      return diagnose_in_sandbox(id, rc, b, args, out, err);
    if (runtime.empty()) rest.insert(rest.end(), {"--runtime", rc.binary});
    if (root.empty() && !rc.root.empty()) rest.insert(rest.end(), {"--runtime-root", rc.root});
  }
  return checkpoint::diagnose_main(rest, out, err);
}

}  // namespace nvproxy::shim
