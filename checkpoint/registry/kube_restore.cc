#include "checkpoint/registry/kube_restore.h"

#include "checkpoint/image/image_layout.h"
#include "checkpoint/image/layout_blobs.h"
#include "checkpoint/registry/kube_checkpoint.h"
#include "checkpoint/registry/layout_transfer.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/scratch_dir.h"

namespace nvproxy::checkpoint {

namespace fs = std::filesystem;
using json = nlohmann::json;

KubeCheckpoint fetch_kube_checkpoint(const std::string& reference, const fs::path& into, ImageRegistry& registry,
                                     ProcessRunner& runner) {
  const std::string what = "checkpoint image " + reference;
  ScratchDir layout(into / "layout");
  pull_layout(reference, layout.path(), kLayoutTag, registry);
  const json index = read_json_object(layout.path() / "index.json", what);
  if (!index.contains("manifests") || !index["manifests"].is_array() || index["manifests"].size() != 1)
    throw Error(Code::InvalidArgument, what + ": the pulled layout does not hold one manifest");
  const json manifest = read_json_object(blob_path(layout.path(), index["manifests"][0].value("digest", "")), what);
  const json annotations = manifest.value("annotations", json::object());
  std::string container;
  if (annotations.is_object()) container = annotations.value(kCheckpointNameAnnotation, "");
  if (container.empty())
    throw Error(Code::InvalidArgument, what + " is not a checkpoint image: its manifest has no " +
                                           std::string(kCheckpointNameAnnotation) + " annotation");
  const json layers = manifest.value("layers", json::array());
  if (!layers.is_array() || layers.size() != 1)
    throw Error(Code::InvalidArgument,
                what + ": a checkpoint image has one layer, this one has " + std::to_string(layers.size()));
  const fs::path dir = kube_archive_in(into);
  fs::create_directories(dir);
  // GNU tar finds a compressed layer's compression itself, drops leading "/" and refuses ".." in
  // member names: nothing lands outside the directory.
  run_tar({"-xf", blob_path(layout.path(), layers[0].value("digest", "")).string(), "-C", dir.string(), "--no-same-owner"},
          runner, "unpacking the layer of " + reference);
  return read_kube_archive(dir, std::move(container), what);
}

}  // namespace nvproxy::checkpoint
