#include "shim/task/info_cmd.h"

#include <chrono>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "common/process.h"
#include "proto/introspection.pb.h"
#include "shim/kit/version.h"
#include "shim/task/config.h"
#include "shim/task/task_options.h"

namespace nvproxy::shim {

int info_main(std::istream& in, std::ostream& out) {
  std::string input((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  containerd::types::RuntimeInfo info;
  info.set_name(kRuntimeType);
  info.mutable_version()->set_version(kVersion);
  TaskOptions opts;
  wkt::Any any;
  if (!input.empty() && any.ParseFromString(input) && !any.type_url().empty()) {
    opts = decode_task_options(any, "runtime info options");
    *info.mutable_options() = any;
  }
  oci::RuntimeConfig rc = ShimConfig{}.runtime;
  try {
    rc = load_config(opts.config_path).runtime;
  } catch (const std::exception&) {
    // A config that cannot be read is Create's error to report; info names the default runtime.
  }
  apply_task_options(opts, rc);
  // The runtime's features as containerd's runc shim reports them; a runtime without the
  // command (runsc, older runc) reports none, which containerd accepts.
  DirectWaiter waiter;
  ProcessRunner runner(waiter);
  try {
    RunResult r = runner.run({.argv = {rc.binary, "features"}, .timeout = std::chrono::seconds(10)});
    if (r.ok() && nlohmann::json::accept(r.out)) {
      info.mutable_features()->set_type_url("types.containerd.io/opencontainers/runtime-spec/1/features/Features");
      info.mutable_features()->set_value(r.out);
    }
  } catch (const std::exception&) {
    // The runtime binary is missing: no features (containerd only logs it).
  }
  out << info.SerializeAsString();
  return 0;
}

}  // namespace nvproxy::shim
