#include "hooks/hook_main.h"

#include <iterator>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "gpu/record.h"
#include "hooks/gpu_setup.h"

namespace nvproxy::hooks {

int hook_main(const std::vector<std::string>& args_in, std::istream& state_json, std::ostream& err) {
  std::vector<std::string> args = args_in;
  if (!args.empty() && args.front() == "hook") args.erase(args.begin());
  if (args.empty() || args.front() != gpu::kHookName) {
    err << "usage: hook " << gpu::kHookName << " [--ldconfig PATH] [--no-ldconfig] [--runsc] < OCI-state.json\n";
    return 2;
  }
  const std::string name = "nvproxy hook " + args.front();
  GpuSetupOptions opts;
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--no-ldconfig")
      opts.run_ldconfig = false;
    else if (args[i] == "--runsc")
      opts.runsc = true;
    else if (args[i] == "--ldconfig" && i + 1 < args.size())
      opts.ldconfig = args[++i];
    else {
      err << name << ": unknown argument \"" << args[i] << "\"\n";
      return 2;
    }
  }
  nlohmann::json state;
  try {
    state = nlohmann::json::parse(std::string(std::istreambuf_iterator<char>(state_json), {}));
  } catch (const nlohmann::json::exception& e) {
    err << name << ": invalid OCI state on stdin: " << e.what() << "\n";
    return 1;
  }
  std::string id = state.is_object() ? state.value("id", "") : "";
  if (id.empty()) {
    err << name << ": OCI state on stdin has no container id\n";
    return 1;
  }
  try {
    run_gpu_setup(state, opts, err);
    return 0;
  } catch (const std::exception& e) {
    err << name << ": container \"" << id << "\": " << e.what() << "\n";
    return 1;
  }
}

}  // namespace nvproxy::hooks
