#include "shim/task/diagnose_cmd.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "checkpoint/diagnose.h"
#include "checkpoint/diagnostic.h"
#include "checkpoint/sandbox_tools.h"
#include "common/fs.h"
#include "gpu/record.h"
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
    checkpoint::SandboxTarget t;
    t.runsc.push_back(rc.binary);
    if (!rc.root.empty()) t.runsc.push_back("--root=" + rc.root);
    t.runsc.insert(t.runsc.end(), rc.extra_args.begin(), rc.extra_args.end());
    t.container_id = id;
    auto spec = nlohmann::json::parse(read_file(bundle / "config.json"), nullptr, false);
    if (auto rec = spec.is_discarded() ? std::nullopt : gpu::read_record(spec))
      t.lib_dirs = rec->value("ldDirs", std::vector<std::string>{});
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
  bool given = !flag_value(args, "--runtime").empty() || !flag_value(args, "--runtime-root").empty();
  if (!id.empty() && !given) {
    std::string ns = flag_value(args, "--namespace");
    if (ns.empty()) ns = "default";
    std::string bundle = flag_value(args, "--bundle");
    std::filesystem::path b = bundle.empty() ? default_bundle(ns, id) : std::filesystem::path(bundle);
    auto rc = locate_runtime(b, ns);
    if (oci::runtime_kind_from_binary(rc.binary) == oci::RuntimeKind::Runsc && flag_value(args, "--pid").empty())
      return diagnose_in_sandbox(id, rc, b, args, out, err);
    rest.insert(rest.end(), {"--runtime", rc.binary});
    if (!rc.root.empty()) rest.insert(rest.end(), {"--runtime-root", rc.root});
  }
  return checkpoint::diagnose_main(rest, out, err);
}

}  // namespace nvproxy::shim
