#include "shim/task/diagnose_cmd.h"

#include "checkpoint/diagnose/diagnose.h"
#include "shim/task/checkpoint_wiring.h"
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

// The runtime that drives the container: what the operator named, the rest from the bundle's
// record of what Create chose.
oci::RuntimeConfig runtime_of(const checkpoint::DiagnoseRequest& r, const std::filesystem::path& bundle) {
  oci::RuntimeConfig rc;
  if (!r.id.empty() && (r.runtime.empty() || r.runtime_root.empty())) {
    rc = locate_runtime(bundle, r.ns);
    if (!r.runtime.empty() && r.runtime != rc.binary) rc.root.clear();  // another runtime: its own default root
  }
  if (!r.runtime.empty()) rc.binary = r.runtime;
  if (!r.runtime_root.empty()) rc.root = r.runtime_root;
  return rc;
}

// The container's checkpoint session, wired as a Checkpoint RPC wires it, asked to inspect.
checkpoint::Inspection inspect(const checkpoint::DiagnoseRequest& r, const std::string& bundle_flag) {
  std::filesystem::path bundle;
  if (!r.id.empty()) bundle = bundle_flag.empty() ? default_bundle(r.ns, r.id) : std::filesystem::path(bundle_flag);
  DirectWaiter waiter;
  ProcessRunner runner(waiter);
  Logger log(-1);
  oci::Runtime rt(runtime_of(r, bundle), runner, log, {});
  SessionSubject s{.runtime = rt,
                   .id = r.id.empty() ? "(pids " + std::to_string(r.pids.front()) + "...)" : r.id,
                   .bundle = bundle,
                   .gpu = true,  // under runsc: asked inside the sandbox, as a GPU container's checkpoint is
                   .cfg = r.cfg,
                   .content_store = r.content_store,
                   .pids = r.pids};
  SessionWiring w(s, nullptr, false, runner, log);
  return w.session().inspect(r.image_path);
}

}  // namespace

int diagnose_cmd(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::vector<std::string> rest;  // --bundle is ours, the rest diagnose_main's
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--bundle") {
      ++i;
      continue;
    }
    if (args[i].rfind("--bundle=", 0) == 0) continue;
    rest.push_back(args[i]);
  }
  const std::string bundle = flag_value(args, "--bundle");
  return checkpoint::diagnose_main(rest, out, err, [&](const checkpoint::DiagnoseRequest& r) { return inspect(r, bundle); });
}

}  // namespace nvproxy::shim
