#include "shim/task/registry_client.h"

#include <unistd.h>

#include <sstream>

#include "checkpoint/image/transfer_wire.h"
#include "checkpoint/programs/shim_files.h"
#include "common/error.h"

namespace nvproxy::shim {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string image_transfer_path(const checkpoint::CheckpointConfig& cfg) {
  if (!cfg.image_transfer.empty()) return cfg.image_transfer;
  std::string p = checkpoint::find_beside_shim(checkpoint::kImageTransferProgram, X_OK);
  return p.empty() ? std::string(checkpoint::kPackagedLibexecDir) + "/" + checkpoint::kImageTransferProgram : p;
}

std::vector<std::string> registry_args(const checkpoint::CheckpointConfig& cfg, const std::string& store) {
  std::vector<std::string> a{std::string("--tls-verify=") + (cfg.registry_tls_verify ? "true" : "false"),
                             "--timeout-s",
                             std::to_string(cfg.registry_timeout_s),
                             "--streams",
                             std::to_string(cfg.registry_streams),
                             "--chunk-mib",
                             std::to_string(cfg.registry_chunk_mib),
                             "--compress",
                             cfg.registry_compression};
  if (!cfg.registry_authfile.empty()) a.insert(a.end(), {"--authfile", cfg.registry_authfile});
  if (!store.empty()) a.insert(a.end(), {"--store", store});
  return a;
}

TransferProgram::TransferProgram(const checkpoint::CheckpointConfig& cfg, ProcessRunner& runner, Logger& log, std::string who)
    : cfg_(cfg),
      runner_(runner),
      log_(log),
      who_(std::move(who)),
      program_(image_transfer_path(cfg)),
      timeout_(std::chrono::seconds(cfg.image_transfer_timeout_s)) {}

json TransferProgram::run(const std::vector<std::string>& args, const std::string& reference, const std::string& store) {
  const std::string command = std::string(checkpoint::kImageTransferProgram) + " " + args.front();
  const std::string what = command + " of the image " + reference;
  if (std::string problem = program_problem(program_); !problem.empty())
    throw Error(Code::FailedPrecondition, "cannot run " + what + ": " + program_ + " " + problem +
                                              " (checkpoint.image_transfer; the package installs it in " +
                                              checkpoint::kPackagedLibexecDir + ")");
  Command cmd{.argv = {program_}, .new_process_group = true, .timeout = timeout_};
  cmd.argv.insert(cmd.argv.end(), args.begin(), args.end());
  for (auto& a : registry_args(cfg_, store)) cmd.argv.push_back(std::move(a));
  RunResult r;
  try {
    r = runner_.run(cmd);
  } catch (const Error& e) {
    throw Error(Code::FailedPrecondition, "cannot start " + what + ": " + e.what());
  }
  std::istringstream progress(r.err);
  for (std::string line; std::getline(progress, line);)
    if (!line.empty()) log_.info(who_ + line);
  if (r.timed_out)
    throw DeadlineError(command, "the image " + reference, timeout_, r.killed_pgid,
                        std::string("killed it") +
                            (r.killed_pgid ? " and what it started (pgid " + std::to_string(r.killed_pgid) + ")" : "") +
                            "; nothing it fetched is used, a pull's whole chunks stay in the store for the next try "
                            "(checkpoint.image_transfer_timeout_s)");
  std::optional<json> answer;
  try {
    answer = checkpoint::read_transfer_answer(r.out);  // the program's own Error, its code and words
  } catch (const Error& e) {
    const std::string m = e.what();
    if (m.find(reference) != std::string::npos) throw;
    throw Error(e.code(), "the registry image " + reference + ": " + m);  // "connecting to ...: refused"
  }
  if (!answer) throw Error(Code::Internal, what + " ended without an answer (" + r.describe() + ")");
  return *answer;
}

fs::path TransferProgram::pull(const std::string& reference, const fs::path& store, const checkpoint::RecordCheck& check) {
  const json rec = run({"record", reference}, reference, store.string());
  std::optional<checkpoint::ImageRecord> record;
  if (rec.is_object() && rec.contains("record") && !rec["record"].is_null()) {
    try {
      record = checkpoint::image_record_from_json(rec["record"]);
    } catch (const Error& e) {
      throw Error(e.code(), "the record of the registry image " + reference + ": " + e.what());
    }
  }
  if (check) check(record);  // refused here, before the bulk moves
  const json got = run({"fetch", reference}, reference, store.string());
  if (!got.is_object() || !got.contains("entry") || !got["entry"].is_string())
    throw Error(Code::Internal, std::string(checkpoint::kImageTransferProgram) + " fetch of the image " + reference +
                                    " answered no store entry: " + got.dump());
  fs::path entry = got["entry"].get<std::string>();
  if (const fs::path rel = entry.lexically_relative(store / "registry"); rel.empty() || *rel.begin() == "..")
    throw Error(Code::Internal, std::string(checkpoint::kImageTransferProgram) + " fetch of the image " + reference +
                                    " answered " + entry.string() + ", outside the store's registry/ directory");
  return entry;
}

checkpoint::KubeCheckpoint TransferProgram::fetch_kube(const std::string& reference, const fs::path& into) {
  const json got = run({"fetch-kube", reference, into.string()}, reference, "");
  if (!got.is_object() || !got.contains("container") || !got["container"].is_string())
    throw Error(Code::Internal, std::string(checkpoint::kImageTransferProgram) + " fetch-kube of the image " + reference +
                                    " answered no container: " + got.dump());
  return checkpoint::read_kube_archive(checkpoint::kube_archive_in(into), got["container"].get<std::string>(),
                                       "checkpoint image " + reference);
}

}  // namespace nvproxy::shim
