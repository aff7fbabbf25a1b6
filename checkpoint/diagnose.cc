#include "checkpoint/diagnose.h"

#include <optional>

#include <boost/program_options.hpp>
#include <filesystem>
#include <memory>

#include "checkpoint/config.h"
#include "checkpoint/cuda_helper_client.h"
#include "checkpoint/holder_scan.h"
#include "checkpoint/orchestrator_kit.h"
#include "checkpoint/process_list.h"
#include "checkpoint/space_check.h"
#include "common/error.h"
#include "common/log.h"
#include "common/process.h"

namespace nvproxy::checkpoint {

namespace po = boost::program_options;

int diagnose_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CheckpointConfig cfg;
  std::string id, ns = "default", root, runtime = "runc";
  std::vector<int> pid_args;
  std::vector<std::string> globs;
  // Where containerd's client has the runtime write an image (a ctrd-checkpoint-* dir in its temp
  // dir) and where containerd copies it: the space check asks about the same places.
  std::string image_path = (std::filesystem::temp_directory_path() / "ctrd-checkpoint").string(),
              content_store = cfg.content_store;
  po::options_description opts("diagnose options");
  opts.add_options()("help,h", "show this help")("id", po::value(&id), "container id")(
      "namespace", po::value(&ns)->default_value(ns), "containerd namespace")(
      "runtime-root", po::value(&root), "the runtime's --root (the shim finds it in the bundle; else the runtime's own default)")(
      "runtime", po::value(&runtime)->default_value(runtime), "OCI runtime binary for `ps`")(
      "pid", po::value(&pid_args)->multitoken(), "pids to inspect instead of asking the runtime")(
      "json", po::bool_switch(), "print JSON")("cuda", po::value(&cfg.cuda)->default_value(cfg.cuda),
                                               "driver-api | cuda-checkpoint | none")(
      "cuda-checkpoint-path", po::value(&cfg.cuda_checkpoint_path)->default_value(cfg.cuda_checkpoint_path), "")(
      "cuda-helper", po::value(&cfg.cuda_helper), "nvproxy-cuda-helper (default: beside this binary)")(
      "libcuda", po::value(&cfg.libcuda)->default_value(cfg.libcuda), "CUDA driver library")(
      "libnvml", po::value(&cfg.libnvml)->default_value(cfg.libnvml), "NVML library")(
      "device-glob", po::value(&globs)->multitoken(), "device path globs (default /dev/nvidia*)")(
      "image-path", po::value(&image_path)->default_value(image_path), "where the image would be written (space check)")(
      "content-store", po::value(&content_store)->default_value(content_store),
      "containerd's root, where it copies the image (empty: no copy)");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(opts).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    err << "error: " << e.what() << "\n" << opts;
    return 2;
  }
  if (vm.count("help")) {
    out << "usage: containerd-shim-nvproxy-v1 diagnose --id ID [options]\n" << opts;
    return 0;
  }
  if (id.empty() && pid_args.empty()) {
    err << "error: --id (or --pid) is required\n";
    return 2;
  }
  if (!globs.empty()) cfg.device_globs = globs;

  try {
    DirectWaiter waiter;
    ProcessRunner runner(waiter);
    std::unique_ptr<ProcessLister> lister;
    if (!pid_args.empty())
      lister = std::make_unique<FunctionLister>(std::vector<pid_t>(pid_args.begin(), pid_args.end()));
    else
      lister = std::make_unique<RuntimePsLister>(runner, runtime, root, id);
    Logger log(-1);
    OrchestratorKit kit(cfg, std::move(lister), runner, log);
    HostSpaceProbe space;
    kit.orch.set_space_probe(&space);
    // As a checkpoint would hold the container still (session_tools.cc), so that processes that
    // die unheld (JAX) are judged the same; inspect() stops nothing.
    std::optional<HelperHold> hold;
    if (cfg.hold_still && cfg.cuda == "driver-api" && kit.cuda.helper) {
      hold.emplace(
          kit.cuda.helper, [] {}, [] {});
      kit.orch.set_container_hold(&*hold);
    }
    // The same request a checkpoint would make, so that the same decide() answers.
    CheckpointRequest req{.container_id = id.empty() ? "(pids " + std::to_string(pid_args.front()) + "...)" : id,
                          .image_path = image_path};
    if (containerd_copies_image(req.image_path)) req.content_store = content_store;
    if (pid_args.empty()) {
      try {
        req.init_pid = runtime_init_pid(runner, runtime, root, id);
      } catch (const Error& e) {
        err << "warning: processes outside the init's tree are not looked for: " << e.what() << "\n";
      }
    }
    try {
      for (const auto& [pid, uses] : kit.cuda.probe->host_facts().processes)
        for (const auto& u : uses) req.device_bytes[pid] += u.used_bytes.value_or(0);
    } catch (const Error&) {
      // Without NVML the space check counts device memory as unknown, and says so.
    }
    Inspection ins = kit.orch.inspect(req);
    if (vm["json"].as<bool>()) {
      auto j = to_json(ins.diagnostic);
      j["would_refuse"] = ins.would_refuse;
      out << j.dump(2) << "\n";
    } else {
      out << render_text(ins.diagnostic);
    }
    return ins.would_refuse ? 3 : 0;
  } catch (const std::exception& e) {
    err << "error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace nvproxy::checkpoint
