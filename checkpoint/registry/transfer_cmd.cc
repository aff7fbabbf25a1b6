#include "checkpoint/registry/transfer_cmd.h"

#include <boost/program_options.hpp>

#include <sys/prctl.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>

#include "checkpoint/image/image_store.h"
#include "checkpoint/image/transfer_wire.h"
#include "checkpoint/registry/ctr_checkpoint.h"
#include "checkpoint/registry/http_registry.h"
#include "checkpoint/registry/image_transfer.h"
#include "checkpoint/registry/kube_checkpoint.h"
#include "checkpoint/registry/kube_restore.h"
#include "common/process.h"

namespace nvproxy::checkpoint {

namespace po = boost::program_options;
using json = nlohmann::json;

namespace {

constexpr const char* kUsage =
    "usage: nvproxy-image-transfer push DIR REFERENCE [--rewrite] [OPTIONS]\n"
    "       nvproxy-image-transfer pull REFERENCE [OUT] [OPTIONS]\n"
    "       nvproxy-image-transfer push --ctr NAME REFERENCE [CTR OPTIONS] [OPTIONS]\n"
    "       nvproxy-image-transfer pull --ctr REFERENCE [CTR OPTIONS] [OPTIONS]\n"
    "       nvproxy-image-transfer push --kube ARCHIVE REFERENCE [OPTIONS]\n"
    "       nvproxy-image-transfer record|fetch REFERENCE [OPTIONS]   (for the shim: a JSON answer)\n"
    "       nvproxy-image-transfer fetch-kube REFERENCE INTO [OPTIONS]\n"
    "options: --store S --tls-verify=true|false --authfile F --timeout-s N --streams N --chunk-mib N --compress none|zstd\n"
    "ctr options: --address SOCKET (/run/containerd/containerd.sock) --namespace NS (default)\n"
    "Run by containerd-shim-nvproxy-v1 (its `image push|pull` and restores from a registry), which passes its "
    "configuration as options.\n";

struct Settings {
  RegistryOptions registry;
  TransferOptions transfer;
};

// The options' settings. Error(InvalidArgument) naming the configuration key when streams or the
// chunk size is 0 or the compression unknown (the shim passes checkpoint.registry_* as they are).
Settings settings_of(const po::variables_map& vm, TransferProgress::Sink progress, bool terminal) {
  const unsigned streams = vm["streams"].as<unsigned>();
  const unsigned chunk_mib = vm["chunk-mib"].as<unsigned>();
  const std::string compress = vm["compress"].as<std::string>();
  if (streams == 0 || streams > 64)
    throw Error(Code::InvalidArgument, "checkpoint.registry_streams is " + std::to_string(streams) + ": 1 to 64");
  if (chunk_mib == 0) throw Error(Code::InvalidArgument, "checkpoint.registry_chunk_mib is 0: a chunk holds at least one MiB");
  if (compress != "none" && compress != "zstd")
    throw Error(Code::InvalidArgument, "checkpoint.registry_compression is \"" + compress + "\": none or zstd");
  return {.registry = {.tls_verify = vm["tls-verify"].as<bool>(),
                       .authfile = vm.count("authfile") ? vm["authfile"].as<std::string>() : "",
                       .timeout = std::chrono::seconds(vm["timeout-s"].as<unsigned>())},
          .transfer = {.streams = static_cast<int>(streams),
                       .chunk_bytes = static_cast<std::uint64_t>(chunk_mib) << 20,
                       .zstd = compress == "zstd",
                       .progress = std::move(progress),
                       .terminal = terminal}};
}

// What a push did, in bytes a script can read, then in words.
std::string pushed(const PushResult& r) {
  return "pushed " + std::to_string(r.files) + " files in " + std::to_string(r.chunks) + " chunks, " + std::to_string(r.bytes) +
         " bytes (" + std::to_string(r.sent) + " sent, " + std::to_string(r.skipped) + " already in the registry, " +
         std::to_string(r.mounted) + " mounted from other repositories): " + r.pinned + "\n" + r.summary + "\n";
}

// What a pull says about the image before its bulk moves.
void describe_record(const std::optional<ImageRecord>& rec, std::ostream& out) {
  if (!rec) {
    out << "record: none (an image without CUDA processes)\n";
    return;
  }
  out << "record: container " << rec->container << ", " << rec->cuda_processes << " CUDA processes";
  if (!rec->runtime.empty()) out << ", written by " << rec->runtime << " " << rec->runtime_version;
  if (!rec->criu_version.empty()) out << " with CRIU " << rec->criu_version;
  if (rec->gpu) out << ", driver " << rec->gpu->driver_version;
  out << "\n" << std::flush;
}

// The shim's verbs: one JSON answer on `out`, progress lines on stderr.
int answer_shim(const std::string& verb, const std::vector<std::string>& paths, const po::variables_map& vm,
                const std::string& store, std::ostream& out) {
  // Run by a shim's daemon for a restore: gone with it, nobody would use what it fetches.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  try {
    Settings s = settings_of(
        vm,
        [](const std::string& line, bool) {
          std::fprintf(stderr, "%s\n", line.c_str());
          std::fflush(stderr);
        },
        false);
    HttpRegistry registry(s.registry);
    if (verb == "record") {
      const auto rec = remote_record(paths[0], store, registry);
      out << transfer_answer({{"record", rec ? to_json(*rec) : json(nullptr)}});
    } else if (verb == "fetch") {
      const auto entry = pull_image(paths[0], store, registry, nullptr, s.transfer);
      out << transfer_answer({{"entry", entry.string()}});
    } else {
      DirectWaiter waiter;
      ProcessRunner runner(waiter);
      const KubeCheckpoint k = fetch_kube_checkpoint(paths[0], paths[1], registry, runner);
      out << transfer_answer({{"container", k.container}, {"dir", k.dir.string()}});
    }
    return 0;
  } catch (const Error& e) {
    out << transfer_failure(e.code(), e.what());
  } catch (const std::exception& e) {
    out << transfer_failure(Code::Internal, e.what());
  }
  return 1;
}

}  // namespace

int image_transfer_cmd(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  po::options_description opts;
  opts.add_options()("store", po::value<std::string>()->default_value(""))("rewrite", po::bool_switch())(
      "tls-verify", po::value<bool>()->default_value(true))("authfile", po::value<std::string>())(
      "timeout-s", po::value<unsigned>()->default_value(3600))("streams", po::value<unsigned>()->default_value(16))(
      "chunk-mib", po::value<unsigned>()->default_value(16))("compress", po::value<std::string>()->default_value("none"))(
      "verb", po::value<std::string>())("paths", po::value<std::vector<std::string>>())(
      "ctr", po::value<std::string>()->implicit_value(""))("kube", po::value<std::string>())("address", po::value<std::string>())(
      "namespace", po::value<std::string>());
  po::positional_options_description pos;
  pos.add("verb", 1).add("paths", -1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(opts).positional(pos).run(), vm);
  } catch (const po::error& e) {
    err << "nvproxy-image-transfer: " << e.what() << "\n" << kUsage;
    return 2;
  }
  const auto words = transfer_words(vm.count("verb") ? vm["verb"].as<std::string>() : "",
                                    vm.count("paths") ? vm["paths"].as<std::vector<std::string>>() : std::vector<std::string>{},
                                    vm.count("ctr") ? std::optional(vm["ctr"].as<std::string>()) : std::nullopt,
                                    vm.count("kube") ? vm["kube"].as<std::string>() : "");
  if (!words) {
    err << kUsage;
    return 2;
  }
  const auto& [verb, paths, ctr, ctr_name, kube_archive] = *words;
  const std::string store = vm["store"].as<std::string>();
  const bool plain = !ctr && kube_archive.empty();
  if (((verb == "record" || verb == "fetch") && plain && paths.size() == 1) ||
      (verb == "fetch-kube" && plain && paths.size() == 2))
    return answer_shim(verb, paths, vm, store, out);
  if (!is_push_or_pull(*words)) {
    err << kUsage;
    return 2;
  }
  try {
    DirectWaiter waiter;
    ProcessRunner runner(waiter);
    // Progress on the terminal (one line, redrawn), else a line every 10 s; the result on `out`.
    const bool tty = ::isatty(STDERR_FILENO) != 0;
    Settings s = settings_of(
        vm,
        [](const std::string& line, bool redraw) {
          std::fprintf(stderr, redraw ? "\r\033[K%s" : "%s\n", line.c_str());
          std::fflush(stderr);
        },
        tty);
    HttpRegistry registry(s.registry);
    CtrTarget target;
    if (vm.count("address")) target.address = vm["address"].as<std::string>();
    if (vm.count("namespace")) target.ns = vm["namespace"].as<std::string>();
    if (!kube_archive.empty()) {
      auto r = push_kube_checkpoint(paths[0], paths[1], store, registry, runner, s.transfer);
      out << pushed(r.data) << "checkpoint image of container " << r.container << " (for CRI's CreateContainer): " << r.image
          << "\n";
      return 0;
    }
    if (verb == "push" && ctr) {
      auto r = push_ctr_checkpoint(ctr_name, paths[0], store, target, registry, runner, s.transfer);
      out << pushed(r.data) << "containerd's checkpoint image " << ctr_name << ": " << r.archive << "\n";
      return 0;
    }
    if (verb == "pull" && ctr) {
      std::string name = pull_ctr_checkpoint(
          paths[0], store, target, registry, runner, [&](const std::optional<ImageRecord>& rec) { describe_record(rec, out); },
          s.transfer);
      out << "imported containerd's checkpoint image " << name << " (namespace " << target.ns
          << "); `ctr containers restore` pulls its data into " << store << "\n";
      return 0;
    }
    if (verb == "push") {
      auto r = push_image(paths[0], store, paths[1], vm["rewrite"].as<bool>(), registry, s.transfer);
      out << pushed(r);
      if (vm["rewrite"].as<bool>()) out << paths[0] << " now refers to " << r.pinned << "\n";
      return 0;
    }
    ChunkPull report;
    auto entry = pull_image(
        paths[0], store, registry, [&](const std::optional<ImageRecord>& rec) { describe_record(rec, out); }, s.transfer,
        &report);
    out << "pulled into " << entry.string() << " (" << report.fetched << " fetched, " << report.resumed << " resumed, "
        << report.reused << " from earlier pulls)\n";
    if (!report.summary.empty()) out << report.summary << "\n";
    if (paths.size() == 2) {
      std::filesystem::create_directories(paths[1]);
      auto rec = read_image_record(entry);
      refer_to_entry(store, paths[1], entry, rec ? rec->container : "");
      out << paths[1] << " refers to it\n";
    }
    return 0;
  } catch (const std::exception& e) {
    // The image is named where the cause below does not name it ("connecting to ...: refused").
    const std::string& reference = verb == "push" ? paths.back() : paths.front();
    const std::string cause = e.what();
    err << "image " << verb << (cause.find(reference) == std::string::npos ? " " + reference : "") << ": " << cause << "\n";
    return 1;
  }
}

}  // namespace nvproxy::checkpoint
