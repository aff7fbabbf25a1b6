#include "shim/task/image_cmd.h"

#include <boost/program_options.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "checkpoint/image/ctr_checkpoint.h"
#include "checkpoint/image/image_store.h"
#include "checkpoint/image/image_transfer.h"
#include "checkpoint/image/kube_checkpoint.h"
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

// What a push did, in bytes a script can read, then in words.
std::string pushed(const checkpoint::PushResult& r) {
  return "pushed " + std::to_string(r.files) + " files in " + std::to_string(r.chunks) + " chunks, " + std::to_string(r.bytes) +
         " bytes (" + std::to_string(r.sent) + " sent, " + std::to_string(r.skipped) + " already in the registry, " +
         std::to_string(r.mounted) + " mounted from other repositories): " + r.pinned + "\n" + r.summary + "\n";
}

// What a pull says about the image before its bulk moves.
void describe_record(const std::optional<checkpoint::ImageRecord>& rec, std::ostream& out) {
  if (!rec) {
    out << "record: none (an image without CUDA processes)\n";
    return;
  }
  out << "record: container " << rec->container << ", " << rec->cuda_processes << " CUDA processes";
  if (!rec->runtime.empty()) out << ", written by " << rec->runtime << " " << rec->runtime_version;
  if (!rec->criu_version.empty()) out << " with CRIU " << rec->criu_version;
  if (rec->gpu) out << ", driver " << rec->gpu->driver_version;
  out << "\n";
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
  std::string verb = vm.count("verb") ? vm["verb"].as<std::string>() : "";
  std::vector<std::string> paths = vm.count("paths") ? vm["paths"].as<std::vector<std::string>>() : std::vector<std::string>{};
  const bool ctr = vm.count("ctr") > 0;
  const std::string kube_archive = vm.count("kube") ? vm["kube"].as<std::string>() : "";
  std::string ctr_name = ctr ? vm["ctr"].as<std::string>() : "";
  if (verb == "pull" && !ctr_name.empty()) {  // `pull --ctr REFERENCE`: the option took the reference
    paths.insert(paths.begin(), ctr_name);
    ctr_name.clear();
  }
  if (!kube_archive.empty() && (verb != "push" || ctr || paths.size() != 1)) {
    err << kUsage;
    return 2;
  }
  if (!kube_archive.empty()) paths.insert(paths.begin(), kube_archive);
  if (!((verb == "pack" && paths.size() == 2 && !ctr) || (verb == "prune" && paths.empty() && vm.count("older-than") && !ctr) ||
        (verb == "push" && !ctr && paths.size() == 2) || (verb == "push" && ctr && !ctr_name.empty() && paths.size() == 1) ||
        (verb == "pull" && !ctr && (paths.size() == 1 || paths.size() == 2)) ||
        (verb == "pull" && ctr && ctr_name.empty() && paths.size() == 1))) {
    err << kUsage;
    return 2;
  }
  try {
    std::string store = vm.count("store") ? vm["store"].as<std::string>() : "";
    ShimConfig c = load_config(vm.count("config") ? vm["config"].as<std::string>() : "");
    if (store.empty()) store = c.checkpoint.image_store;
    if (verb == "push" || verb == "pull") {
      DirectWaiter waiter;
      ProcessRunner runner(waiter);
      if (vm.count("tls-verify")) c.checkpoint.registry_tls_verify = vm["tls-verify"].as<bool>();
      if (vm.count("authfile")) c.checkpoint.registry_authfile = vm["authfile"].as<std::string>();
      if (vm.count("streams")) c.checkpoint.registry_streams = vm["streams"].as<unsigned>();
      if (vm.count("compress")) c.checkpoint.registry_compression = vm["compress"].as<std::string>();
      checkpoint::HttpRegistry registry(registry_options(c.checkpoint));
      // Progress on the terminal (one line, redrawn), else a line every 10 s; the result on `out`.
      const bool tty = ::isatty(STDERR_FILENO) != 0;
      const checkpoint::TransferOptions transfer = transfer_options(
          c.checkpoint,
          [](const std::string& line, bool redraw) {
            std::fprintf(stderr, redraw ? "\r\033[K%s" : "%s\n", line.c_str());
            std::fflush(stderr);
          },
          tty);
      checkpoint::CtrTarget target;
      if (vm.count("address")) target.address = vm["address"].as<std::string>();
      if (vm.count("namespace")) target.ns = vm["namespace"].as<std::string>();
      if (!kube_archive.empty()) {
        auto r = checkpoint::push_kube_checkpoint(paths[0], paths[1], store, registry, runner, transfer);
        out << pushed(r.data) << "checkpoint image of container " << r.container << " (for CRI's CreateContainer): " << r.image
            << "\n";
        return 0;
      }
      if (verb == "push" && ctr) {
        auto r = checkpoint::push_ctr_checkpoint(ctr_name, paths[0], store, target, registry, runner, transfer);
        out << pushed(r.data) << "containerd's checkpoint image " << ctr_name << ": " << r.archive << "\n";
        return 0;
      }
      if (verb == "pull" && ctr) {
        std::string name = checkpoint::pull_ctr_checkpoint(
            paths[0], store, target, registry, runner,
            [&](const std::optional<checkpoint::ImageRecord>& rec) { describe_record(rec, out); }, transfer);
        out << "imported containerd's checkpoint image " << name << " (namespace " << target.ns
            << "); `ctr containers restore` pulls its data into " << store << "\n";
        return 0;
      }
      if (verb == "push") {
        auto r = checkpoint::push_image(paths[0], store, paths[1], vm["rewrite"].as<bool>(), registry, transfer);
        out << pushed(r);
        if (vm["rewrite"].as<bool>()) out << paths[0] << " now refers to " << r.pinned << "\n";
        return 0;
      }
      checkpoint::ChunkPull report;
      auto entry = checkpoint::pull_image(
          paths[0], store, registry, [&](const std::optional<checkpoint::ImageRecord>& rec) { describe_record(rec, out); },
          transfer, &report);
      out << "pulled into " << entry.string() << " (" << report.fetched << " fetched, " << report.resumed << " resumed, "
          << report.reused << " from earlier pulls)\n";
      if (!report.summary.empty()) out << report.summary << "\n";
      if (paths.size() == 2) {
        std::filesystem::create_directories(paths[1]);
        auto rec = checkpoint::read_image_record(entry);
        checkpoint::ImageStore(store, 1).refer(paths[1], entry, rec ? rec->container : "");
        out << paths[1] << " refers to it\n";
      }
      return 0;
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
