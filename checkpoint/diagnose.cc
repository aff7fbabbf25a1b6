#include "checkpoint/diagnose.h"

#include <boost/program_options.hpp>
#include <memory>

#include "checkpoint/config.h"
#include "checkpoint/cuda_helper_client.h"
#include "checkpoint/holder_scan.h"
#include "checkpoint/orchestrator_kit.h"
#include "checkpoint/process_list.h"
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
  po::options_description opts("diagnose options");
  opts.add_options()("help,h", "show this help")("id", po::value(&id), "container id")(
      "namespace", po::value(&ns)->default_value(ns), "containerd namespace")(
      "runtime-root", po::value(&root), "the runtime's --root (default /run/containerd/runc/NAMESPACE)")(
      "runtime", po::value(&runtime)->default_value(runtime), "OCI runtime binary for `ps`")(
      "pid", po::value(&pid_args)->multitoken(), "pids to inspect instead of asking the runtime")(
      "json", po::bool_switch(), "print JSON")("cuda", po::value(&cfg.cuda)->default_value(cfg.cuda),
                                               "driver-api | cuda-checkpoint | none")(
      "cuda-checkpoint-path", po::value(&cfg.cuda_checkpoint_path)->default_value(cfg.cuda_checkpoint_path), "")(
      "cuda-helper", po::value(&cfg.cuda_helper), "nvproxy-cuda-helper (default: beside this binary)")(
      "libcuda", po::value(&cfg.libcuda)->default_value(cfg.libcuda), "CUDA driver library")(
      "libnvml", po::value(&cfg.libnvml)->default_value(cfg.libnvml), "NVML library")(
      "device-glob", po::value(&globs)->multitoken(), "device path globs (default /dev/nvidia*)");
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
  if (root.empty()) root = "/run/containerd/runc/" + ns;

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
    Inspection ins = kit.orch.inspect(id.empty() ? "(pids " + std::to_string(pid_args.front()) + "...)" : id);
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
