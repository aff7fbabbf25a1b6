#include "checkpoint/image/kube_archive.h"

#include "common/error.h"
#include "common/fs.h"

namespace nvproxy::checkpoint {

namespace fs = std::filesystem;
using json = nlohmann::json;

json read_json_object(const fs::path& file, const std::string& what) {
  json j = json::parse(read_file(file), nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw Error(Code::InvalidArgument, what + ": " + file.filename().string() + " is not a JSON object");
  return j;
}

KubeCheckpoint read_kube_archive(const fs::path& dir, std::string container, const std::string& what) {
  KubeCheckpoint out{.dir = dir, .container = std::move(container), .spec = {}, .config = {}};
  for (const char* f : {"spec.dump", "config.dump"})
    if (!fs::is_regular_file(out.dir / f)) throw Error(Code::InvalidArgument, what + ": its layer has no " + std::string(f));
  if (!fs::is_directory(out.checkpoint())) throw Error(Code::InvalidArgument, what + ": its layer has no checkpoint/ directory");
  out.spec = read_json_object(out.dir / "spec.dump", what);
  out.config = read_json_object(out.dir / "config.dump", what);
  return out;
}

}  // namespace nvproxy::checkpoint
