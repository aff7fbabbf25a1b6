#include "checkpoint/diagnose/diagnose.h"

#include <boost/program_options.hpp>

#include "checkpoint/diagnose/diagnose_image.h"
#include "checkpoint/report/diagnostic.h"
#include "checkpoint/staging/staging_bill.h"

namespace nvproxy::checkpoint {

namespace po = boost::program_options;

int diagnose_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err, const Inspector& inspect) {
  DiagnoseRequest r;
  CheckpointConfig& cfg = r.cfg;
  std::vector<int> pid_args;
  std::vector<std::string> globs;
  std::string image_dir;
  // containerd's client has the runtime write into a ctrd-checkpoint-* dir of its temp dir.
  std::string image_path = (std::filesystem::temp_directory_path() / "ctrd-checkpoint").string();
  r.content_store = cfg.content_store;
  po::options_description opts("diagnose options");
  opts.add_options()("help,h", "show this help")("id", po::value(&r.id), "container id")(
      "namespace", po::value(&r.ns)->default_value(r.ns), "containerd namespace")(
      "runtime-root", po::value(&r.runtime_root), "the runtime's --root (default: what Create recorded in the bundle)")(
      "runtime", po::value(&r.runtime), "the OCI runtime binary (default: what Create recorded in the bundle)")(
      "pid", po::value(&pid_args)->multitoken(), "pids to inspect instead of asking the runtime")(
      "json", po::bool_switch(), "print JSON")("cuda", po::value(&cfg.cuda)->default_value(cfg.cuda),
                                               "driver-api | cuda-checkpoint | none")(
      "cuda-checkpoint-path", po::value(&cfg.cuda_checkpoint_path)->default_value(cfg.cuda_checkpoint_path), "")(
      "cuda-helper", po::value(&cfg.cuda_helper), "nvproxy-cuda-helper (default: beside this binary)")(
      "libcuda", po::value(&cfg.libcuda)->default_value(cfg.libcuda), "CUDA driver library")(
      "libnvml", po::value(&cfg.libnvml)->default_value(cfg.libnvml), "NVML library")(
      "device-glob", po::value(&globs)->multitoken(), "device path globs (default /dev/nvidia*)")(
      "image-path", po::value(&image_path)->default_value(image_path), "where the image would be written (space check)")(
      "content-store", po::value(&r.content_store)->default_value(r.content_store),
      "containerd's root, where it copies the image (empty: no copy)")(
      "image", po::value(&image_dir), "a checkpoint image: the host files its restore needs, checked on this node");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(opts).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    err << "error: " << e.what() << "\n" << opts;
    return 2;
  }
  if (vm.count("help")) {
    out << "usage: containerd-shim-nvproxy-v1 diagnose --id ID [options]\n       containerd-shim-nvproxy-v1 diagnose --image DIR "
           "[--json]\n"
        << opts;
    return 0;
  }
  if (!image_dir.empty()) return diagnose_image(image_dir, vm["json"].as<bool>(), out, err);
  if (r.id.empty() && pid_args.empty()) {
    err << "error: --id (or --pid) is required\n";
    return 2;
  }
  if (!globs.empty()) cfg.device_globs = globs;
  r.pids.assign(pid_args.begin(), pid_args.end());
  r.image_path = image_path;
  try {
    Inspection ins = inspect(r);
    if (vm["json"].as<bool>()) {
      auto j = to_json(ins.diagnostic);
      j["would_refuse"] = ins.would_refuse;
      if (!ins.sandbox.empty()) j["sandbox"] = ins.sandbox;
      out << j.dump(2) << "\n";
    } else {
      if (!ins.sandbox.empty()) out << "(" << ins.sandbox << " sandbox: pids are the sandbox's own)\n";
      out << render_text(ins.diagnostic);
      if (ins.diagnostic.details.contains("staging")) out << staging_text(ins.diagnostic.details["staging"]);
    }
    return ins.would_refuse ? 3 : 0;
  } catch (const std::exception& e) {
    err << "error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace nvproxy::checkpoint
