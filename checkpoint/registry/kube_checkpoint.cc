#include "checkpoint/registry/kube_checkpoint.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "checkpoint/image/image_layout.h"
#include "checkpoint/image/layout_blobs.h"
#include "checkpoint/registry/ctr_checkpoint.h"
#include "checkpoint/registry/layout_transfer.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/scratch_dir.h"

namespace nvproxy::checkpoint {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// OCI's name for this machine's architecture (the image runs where it was checkpointed).
std::string oci_architecture() {
  utsname u{};
  if (::uname(&u) != 0) return "amd64";
  std::string m = u.machine;
  if (m == "x86_64") return "amd64";
  if (m == "aarch64") return "arm64";
  return m;
}

// The container's name as the pod spec gave it (spec.dump's io.kubernetes.cri.container-name, what
// containerd's own checkpoint images carry), else CRI's full name from config.dump.
std::string container_name(const fs::path& unpacked, const fs::path& archive) {
  for (const char* f : {"spec.dump", "config.dump"})
    if (!fs::exists(unpacked / f))
      throw Error(Code::InvalidArgument, archive.string() + " is not a CRI checkpoint archive: it has no " + f);
  json spec = json::parse(read_file(unpacked / "spec.dump"), nullptr, false);
  if (spec.is_object() && spec.contains("annotations") && spec["annotations"].is_object()) {
    const json& a = spec["annotations"];
    if (auto it = a.find("io.kubernetes.cri.container-name"); it != a.end() && it->is_string() && !it->get<std::string>().empty())
      return it->get<std::string>();
  }
  json c = json::parse(read_file(unpacked / "config.dump"), nullptr, false);
  std::string name;
  if (c.is_object() && c.contains("name") && c["name"].is_string()) name = c["name"].get<std::string>();
  if (name.empty())
    throw Error(Code::InvalidArgument, archive.string() + ": neither spec.dump nor config.dump names the container");
  return name;
}

}  // namespace

KubePushResult push_kube_checkpoint(const fs::path& archive, const std::string& reference, const fs::path& store,
                                    ImageRegistry& registry, ProcessRunner& runner, const TransferOptions& opts) {
  if (!fs::is_regular_file(archive)) throw Error(Code::NotFound, "no checkpoint archive " + archive.string());
  const std::string data_ref = data_reference_of(reference);
  ScratchDir work((store.empty() ? fs::temp_directory_path() : store) / (".kube-push-" + std::to_string(::getpid())));
  const fs::path unpacked = work.path() / "archive";
  fs::create_directories(unpacked);
  run_tar({"-xf", archive.string(), "-C", unpacked.string()}, runner, "unpacking " + archive.string());
  KubePushResult out;
  out.container = container_name(unpacked, archive);
  if (!fs::is_directory(unpacked / "checkpoint"))
    throw Error(Code::InvalidArgument, archive.string() + " holds no checkpoint/ directory");
  // The memory goes as the shim's artifact; checkpoint/ keeps only the reference and the record.
  out.data = push_image(unpacked / "checkpoint", store, data_ref, true, registry, opts);

  const fs::path layout = work.path() / "layout";
  const fs::path made = work.path() / "made";
  fs::create_directories(made);
  run_tar({"-cf", (made / "layer.tar").string(), "-C", unpacked.string(), "."}, runner, "packing the checkpoint image's layer");
  const LayoutFile layer = add_blob(made / "layer.tar", layout, runner);
  const std::string arch = oci_architecture();
  const json annotations = {{kCheckpointNameAnnotation, out.container}, {"org.criu.checkpoint.engine.name", "containerd"}};
  const json config = {{"architecture", arch},
                       {"os", "linux"},
                       {"config", json::object()},
                       {"rootfs", {{"type", "layers"}, {"diff_ids", json::array({layer.digest})}}}};
  const LayoutFile cfg = add_blob_text(config.dump(), layout, runner);
  const json manifest = {
      {"schemaVersion", 2},
      {"mediaType", "application/vnd.oci.image.manifest.v1+json"},
      {"config", {{"mediaType", "application/vnd.oci.image.config.v1+json"}, {"digest", cfg.digest}, {"size", cfg.size}}},
      {"layers",
       json::array({{{"mediaType", "application/vnd.oci.image.layer.v1.tar"}, {"digest", layer.digest}, {"size", layer.size}}})},
      {"annotations", annotations}};
  const LayoutFile man = add_blob_text(manifest.dump(), layout, runner);
  write_layout_top(layout, {{"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                            {"digest", man.digest},
                            {"size", man.size},
                            {"platform", {{"architecture", arch}, {"os", "linux"}}},
                            {"annotations", {{"org.opencontainers.image.ref.name", kLayoutTag}}}});
  out.image = repository_of(reference) + "@" + push_layout(layout, reference, registry);
  return out;
}

}  // namespace nvproxy::checkpoint
