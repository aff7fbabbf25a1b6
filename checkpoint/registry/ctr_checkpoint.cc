#include "checkpoint/registry/ctr_checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "checkpoint/image/image_layout.h"
#include "checkpoint/image/image_record.h"
#include "checkpoint/image/image_store.h"
#include "checkpoint/image/layout_blobs.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/scratch_dir.h"
#include "common/unique_fd.h"

namespace nvproxy::checkpoint {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr const char* kCriuTarType = "application/vnd.containerd.container.criu.checkpoint.criu.tar";
constexpr const char* kImageNameAnnotation = "io.containerd.image.name";

// ctr against the target containerd; stdout to `out_fd` when given. Error naming the step.
RunResult ctr_run(const CtrTarget& t, std::vector<std::string> args, ProcessRunner& runner, const std::string& step,
                  int out_fd = -1) {
  std::string bin = find_program(t.ctr);
  if (bin.empty()) throw Error(Code::FailedPrecondition, step + ": ctr (" + t.ctr + ") is not installed");
  std::vector<std::string> argv{bin, "--address", t.address, "--namespace", t.ns};
  argv.insert(argv.end(), args.begin(), args.end());
  Command c{.argv = argv, .stdout_fd = out_fd, .new_process_group = true, .timeout = t.timeout};
  RunResult r = runner.run(c);
  if (r.timed_out)
    throw DeadlineError("ctr " + args.front(), step, std::chrono::duration_cast<std::chrono::milliseconds>(t.timeout),
                        r.killed_pgid, "killed ctr");
  if (!r.ok()) throw Error(Code::FailedPrecondition, step + ": ctr " + args.front() + " " + args[1] + " failed: " + r.describe());
  return r;
}

// The digest of containerd's image `name` (from `ctr images ls`: NAME TYPE DIGEST ...).
std::string image_digest(const CtrTarget& t, const std::string& name, ProcessRunner& runner) {
  RunResult r = ctr_run(t, {"images", "ls"}, runner, "containerd's image " + name);
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    std::string ref, type, digest;
    if (f >> ref >> type >> digest && ref == name && digest.starts_with("sha256:")) return digest;
  }
  throw Error(Code::NotFound, "containerd (" + t.address + ", namespace " + t.ns + ") has no image " + name);
}

void get_blob(const CtrTarget& t, const std::string& digest, const fs::path& layout, ProcessRunner& runner) {
  fs::path f = blob_path(layout, digest);
  UniqueFd fd(::open(f.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!fd) throw sys_error("create " + f.string());
  ctr_run(t, {"content", "get", digest}, runner, "blob " + digest, fd.get());
}

}  // namespace

std::string data_reference_of(const std::string& reference) {
  if (reference.find('@') != std::string::npos) throw Error(Code::InvalidArgument, "push to a tag, not a digest: " + reference);
  const std::string repo = repository_of(reference);
  std::string tag = reference.size() > repo.size() + 1 ? reference.substr(repo.size() + 1) : "latest";
  return repo + ":" + tag + ".data";
}

CtrPushResult push_ctr_checkpoint(const std::string& name, const std::string& reference, const fs::path& store,
                                  const CtrTarget& ctr, ImageRegistry& registry, ProcessRunner& runner,
                                  const TransferOptions& opts) {
  const std::string data_ref = data_reference_of(reference);
  ScratchDir work((store.empty() ? fs::temp_directory_path() : store) / (".ctr-push-" + std::to_string(::getpid())));
  const fs::path layout = work.path() / "layout";
  fs::create_directories(layout / "blobs" / "sha256");
  const std::string index_digest = image_digest(ctr, name, runner);
  get_blob(ctr, index_digest, layout, runner);
  json index = json::parse(read_file(blob_path(layout, index_digest)), nullptr, false);
  if (!index.is_object() || !index.contains("manifests") || !index["manifests"].is_array())
    throw Error(Code::InvalidArgument, name + " is not a checkpoint image (its target is not an index)");
  json* criu = nullptr;
  for (auto& d : index["manifests"]) {
    get_blob(ctr, d.value("digest", ""), layout, runner);
    if (d.value("mediaType", "") == kCriuTarType) criu = &d;
  }
  // containerd before 2.0 fails a second checkpoint of a container whose spec its content store
  // already holds (AlreadyExists), and ctr takes that error for success: an index without its
  // task's layers.
  if (!criu)
    throw Error(Code::InvalidArgument,
                name + " holds no CRIU checkpoint (" + kCriuTarType +
                    "): was it made by `ctr c checkpoint` without --task, or by containerd 1.6/1.7 while an earlier "
                    "checkpoint image of the same container was still there (they leave the CRIU layer out then)? "
                    "Remove the earlier image (`ctr images rm --sync NAME`) and checkpoint again");

  // The checkpoint directory containerd handed the shim: the store's reference, or the image itself.
  const fs::path dir = work.path() / "checkpoint";
  fs::create_directories(dir);
  const std::string criu_digest = criu->value("digest", "");
  run_tar({"-xf", blob_path(layout, criu_digest).string(), "-C", dir.string()}, runner, "unpacking " + criu_digest);
  fs::remove(blob_path(layout, criu_digest));
  CtrPushResult out;
  out.data = push_image(dir, store, data_ref, true, registry, opts);

  // Its CRIU blob now refers to the data; the index and the archive follow.
  const fs::path made = work.path() / "made";
  fs::create_directories(made);
  run_tar({"-cf", (made / "criu.tar").string(), "-C", dir.string(), "."}, runner, "packing the reference");
  LayoutFile criu_blob = add_blob(made / "criu.tar", layout, runner);
  (*criu)["digest"] = criu_blob.digest;
  (*criu)["size"] = criu_blob.size;
  fs::remove(blob_path(layout, index_digest));
  LayoutFile idx = add_blob_text(index.dump(), layout, runner);
  write_layout_top(layout, {{"mediaType", "application/vnd.oci.image.index.v1+json"},
                            {"digest", idx.digest},
                            {"size", idx.size},
                            {"annotations", {{kImageNameAnnotation, name}}}});

  const fs::path art = work.path() / "artifact";
  fs::create_directories(art);
  run_tar({"-cf", (art / kCtrArchiveFile).string(), "-C", layout.string(), "."}, runner, "packing the archive");
  if (fs::exists(dir / ImageRecord::kFileName)) fs::copy_file(dir / ImageRecord::kFileName, art / ImageRecord::kFileName);
  out.archive = push_image(art, "", reference, false, registry, {.streams = opts.streams}).pinned;
  return out;
}

std::string pull_ctr_checkpoint(const std::string& reference, const fs::path& store, const CtrTarget& ctr,
                                ImageRegistry& registry, ProcessRunner& runner, const RecordCheck& check,
                                const TransferOptions& opts) {
  const fs::path entry = pull_image(reference, store, registry, check, opts);
  const fs::path archive = entry / kCtrArchiveFile;
  if (!fs::exists(archive))
    throw Error(Code::InvalidArgument,
                "the registry image " + reference + " is not a containerd checkpoint (push one with `image push --ctr NAME`)");
  ScratchDir work(store / (".ctr-pull-" + std::to_string(::getpid())));
  run_tar({"-xf", archive.string(), "-C", work.path().string(), "./index.json"}, runner, "reading " + archive.string());
  json top = json::parse(read_file(work.path() / "index.json"), nullptr, false);
  std::string name;
  if (top.is_object() && top.contains("manifests") && top["manifests"].is_array() && !top["manifests"].empty())
    name = top["manifests"][0].value("annotations", json::object()).value(kImageNameAnnotation, "");
  if (name.empty()) throw Error(Code::InvalidArgument, archive.string() + " names no image");
  ctr_run(ctr, {"images", "import", "--no-unpack", archive.string()}, runner, "importing " + name);
  return name;
}

}  // namespace nvproxy::checkpoint
