#include "shim/task/image_cmd.h"

#include <boost/program_options.hpp>

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "checkpoint/image/image_store.h"
#include "checkpoint/image/transfer_wire.h"
#include "checkpoint/programs/shim_files.h"
#include "common/process.h"
#include "shim/task/config.h"
#include "shim/task/registry_client.h"

namespace nvproxy::shim {

namespace po = boost::program_options;

namespace {

constexpr const char* kUsage =
    "usage: containerd-shim-nvproxy-v1 image pack DIR OUT [--store S] [--config F]\n"
    "       containerd-shim-nvproxy-v1 image prune --older-than HOURS [--store S] [--config F]\n"
    "       containerd-shim-nvproxy-v1 image push DIR REFERENCE [--rewrite] [REGISTRY OPTIONS]\n"
    "       containerd-shim-nvproxy-v1 image pull REFERENCE [OUT] [REGISTRY OPTIONS]\n"
    "       containerd-shim-nvproxy-v1 image push --ctr NAME REFERENCE [CTR OPTIONS] [REGISTRY OPTIONS]\n"
    "       containerd-shim-nvproxy-v1 image pull --ctr REFERENCE [CTR OPTIONS] [REGISTRY OPTIONS]\n"
    "       containerd-shim-nvproxy-v1 image push --kube ARCHIVE REFERENCE [REGISTRY OPTIONS]\n"
    "registry options: --tls-verify=true|false --authfile F --streams N --compress none|zstd --store S --config F\n"
    "ctr options: --address SOCKET (/run/containerd/containerd.sock) --namespace NS (default)\n";

// `image push|pull`: nvproxy-image-transfer with the configuration's registry settings and
// store, in place of this process (execv): its progress, output and exit status are the command's.
int exec_transfer(const std::string& verb, const std::vector<std::string>& paths, const po::variables_map& vm,
                  const std::string& ctr_name, const std::string& kube_archive, const ShimConfig& c, const std::string& store,
                  std::ostream& out, std::ostream& err) {
  const std::string program = image_transfer_path(c.checkpoint);
  if (std::string problem = program_problem(program); !problem.empty()) {
    err << "image " << verb << ": cannot run " << program << ": it " << problem
        << " (checkpoint.image_transfer; the package installs nvproxy-image-transfer in " << checkpoint::kPackagedLibexecDir
        << ")\n";
    return 1;
  }
  std::vector<std::string> argv{program, verb};
  if (!kube_archive.empty()) {
    argv.insert(argv.end(), {"--kube", paths[0], paths[1]});
  } else {
    if (vm.count("ctr")) argv.push_back("--ctr");
    if (!ctr_name.empty()) argv.push_back(ctr_name);
    argv.insert(argv.end(), paths.begin(), paths.end());
  }
  if (vm["rewrite"].as<bool>()) argv.push_back("--rewrite");
  for (const char* o : {"address", "namespace"})
    if (vm.count(o)) argv.insert(argv.end(), {std::string("--") + o, vm[o].as<std::string>()});
  for (auto& a : registry_args(c.checkpoint, store)) argv.push_back(std::move(a));
  out.flush();
  err.flush();
  std::fflush(nullptr);
  // This process becomes the program (its pid, its signals, its exit status): a `kill` of the
  // command stops the transfer itself, as it did when the shim spoke to the registry.
  std::vector<char*> raw;
  for (auto& a : argv) raw.push_back(a.data());
  raw.push_back(nullptr);
  ::execv(program.c_str(), raw.data());
  err << "image " << verb << ": cannot run " << program << ": " << std::strerror(errno) << "\n";
  return 1;
}

}  // namespace

int image_cmd(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  po::options_description opts;
  opts.add_options()("store", po::value<std::string>())("config", po::value<std::string>())("older-than", po::value<double>())(
      "rewrite", po::bool_switch())("tls-verify", po::value<bool>())("authfile", po::value<std::string>())(
      "streams", po::value<unsigned>())("compress", po::value<std::string>())("verb", po::value<std::string>())(
      "paths", po::value<std::vector<std::string>>())("ctr", po::value<std::string>()->implicit_value(""))(
      "kube", po::value<std::string>())("address", po::value<std::string>())("namespace", po::value<std::string>());
  po::positional_options_description pos;
  pos.add("verb", 1).add("paths", -1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(opts).positional(pos).run(), vm);
  } catch (const po::error& e) {
    err << "image: " << e.what() << "\n" << kUsage;
    return 2;
  }
  const auto words =
      checkpoint::transfer_words(vm.count("verb") ? vm["verb"].as<std::string>() : "",
                                 vm.count("paths") ? vm["paths"].as<std::vector<std::string>>() : std::vector<std::string>{},
                                 vm.count("ctr") ? std::optional(vm["ctr"].as<std::string>()) : std::nullopt,
                                 vm.count("kube") ? vm["kube"].as<std::string>() : "");
  if (!words) {
    err << kUsage;
    return 2;
  }
  const auto& [verb, paths, ctr, ctr_name, kube_archive] = *words;
  if (!((verb == "pack" && paths.size() == 2 && !ctr) || (verb == "prune" && paths.empty() && vm.count("older-than") && !ctr) ||
        checkpoint::is_push_or_pull(*words))) {
    err << kUsage;
    return 2;
  }
  try {
    std::string store = vm.count("store") ? vm["store"].as<std::string>() : "";
    ShimConfig c = load_config(vm.count("config") ? vm["config"].as<std::string>() : "");
    if (store.empty()) store = c.checkpoint.image_store;
    if (verb == "push" || verb == "pull") {
      if (vm.count("tls-verify")) c.checkpoint.registry_tls_verify = vm["tls-verify"].as<bool>();
      if (vm.count("authfile")) c.checkpoint.registry_authfile = vm["authfile"].as<std::string>();
      if (vm.count("streams")) c.checkpoint.registry_streams = vm["streams"].as<unsigned>();
      if (vm.count("compress")) c.checkpoint.registry_compression = vm["compress"].as<std::string>();
      return exec_transfer(verb, paths, vm, ctr_name, kube_archive, c, store, out, err);
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
    for (const auto& p : checkpoint::prune_store(store, std::chrono::seconds(static_cast<long long>(hours * 3600))))
      out << "removed " << p.string() << "\n";
    return 0;
  } catch (const std::exception& e) {
    err << "image " << verb << ": " << e.what() << "\n";
    return 1;
  }
}

}  // namespace nvproxy::shim
