#include "shim/task/image_cmd.h"

#include <boost/program_options.hpp>

#include "checkpoint/image_store.h"
#include "shim/task/config.h"

namespace nvproxy::shim {

namespace po = boost::program_options;

namespace {

constexpr const char* kUsage =
    "usage: containerd-shim-nvproxy-v1 image pack DIR OUT [--store S] [--config F]\n"
    "       containerd-shim-nvproxy-v1 image prune --older-than HOURS [--store S] [--config F]\n";

}  // namespace

int image_cmd(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  po::options_description opts;
  opts.add_options()("store", po::value<std::string>())("config", po::value<std::string>())("older-than", po::value<double>())(
      "verb", po::value<std::string>())("paths", po::value<std::vector<std::string>>());
  po::positional_options_description pos;
  pos.add("verb", 1).add("paths", -1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(opts).positional(pos).run(), vm);
  } catch (const po::error& e) {
    err << "image: " << e.what() << "\n" << kUsage;
    return 2;
  }
  std::string verb = vm.count("verb") ? vm["verb"].as<std::string>() : "";
  std::vector<std::string> paths = vm.count("paths") ? vm["paths"].as<std::vector<std::string>>() : std::vector<std::string>{};
  if (!((verb == "pack" && paths.size() == 2) || (verb == "prune" && paths.empty() && vm.count("older-than")))) {
    err << kUsage;
    return 2;
  }
  try {
    std::string store = vm.count("store") ? vm["store"].as<std::string>() : "";
    if (store.empty()) {
      ShimConfig c = load_config(vm.count("config") ? vm["config"].as<std::string>() : "");
      store = c.checkpoint.image_store;
    }
    if (verb == "pack") {
      std::uintmax_t bytes = checkpoint::pack_image(paths[0], store, paths[1]);
      out << "packed " << bytes << " bytes into " << paths[1] << "\n";
      return 0;
    }
    if (store.empty()) {
      err << "image prune: no image store (--store, or checkpoint.image_store in the config)\n";
      return 1;
    }
    double hours = vm["older-than"].as<double>();
    if (hours < 0) {
      err << "image prune: --older-than must not be negative\n";
      return 2;
    }
    checkpoint::ImageStore s(store, 1);  // pruning goes by age; the per-container retention is not asked
    for (const auto& p : s.prune_older_than(std::chrono::seconds(static_cast<long long>(hours * 3600))))
      out << "removed " << p.string() << "\n";
    return 0;
  } catch (const std::exception& e) {
    err << "image " << verb << ": " << e.what() << "\n";
    return 1;
  }
}

}  // namespace nvproxy::shim
