#include "checkpoint/registry/layout_transfer.h"

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "checkpoint/image/layout_blobs.h"
#include "checkpoint/registry/image_transfer.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/unique_fd.h"

namespace nvproxy::checkpoint {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The config and layer descriptors of a manifest.
std::vector<json> blobs_of(const json& manifest, const std::string& what) {
  std::vector<json> out;
  if (manifest.contains("config") && manifest["config"].is_object()) out.push_back(manifest["config"]);
  if (manifest.contains("layers") && manifest["layers"].is_array())
    for (const auto& l : manifest["layers"]) out.push_back(l);
  for (const auto& d : out)
    if (!d.is_object() || !d.contains("digest") || !d["digest"].is_string() || !d.contains("size") ||
        !d["size"].is_number_unsigned())
      throw Error(Code::InvalidArgument, what + ": a descriptor of its manifest has no digest or size");
  return out;
}

}  // namespace

std::string push_layout(const fs::path& layout, const std::string& reference, ImageRegistry& registry) {
  const std::string what = "pushing " + layout.string() + " to " + reference;
  json index = json::parse(read_file(layout / "index.json"), nullptr, false);
  if (!index.is_object() || !index.contains("manifests") || !index["manifests"].is_array() || index["manifests"].size() != 1)
    throw Error(Code::InvalidArgument, what + ": the layout does not hold one manifest");
  const json& top = index["manifests"][0];
  const std::string text = read_file(blob_path(layout, top.value("digest", "")));
  const std::string repo = repository_of(reference);
  for (const auto& d : blobs_of(json::parse(text), what)) {
    const std::string digest = d["digest"];
    if (registry.has_blob(repo, digest)) continue;
    const fs::path file = blob_path(layout, digest);
    UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) throw sys_error(what + ": opening " + file.string());
    const ImageRegistry::Reader read = [&](std::uint64_t at, char* buf, std::size_t n) {
      long got = read_at(fd.get(), buf, n, at);
      if (got < 0) throw sys_error(what + ": reading " + file.string());
      return static_cast<std::size_t>(got);
    };
    registry.put_blob(repo, digest, d["size"].get<std::uint64_t>(), read);
  }
  return registry.put_manifest(reference, top.value("mediaType", "application/vnd.oci.image.manifest.v1+json"), text);
}

void pull_layout(const std::string& reference, const fs::path& layout, const std::string& tag, ImageRegistry& registry) {
  const std::string what = "pulling " + reference;
  const ImageRegistry::Manifest m = registry.manifest(reference);
  json manifest = json::parse(m.text, nullptr, false);
  if (!manifest.is_object()) throw Error(Code::InvalidArgument, what + ": its manifest is not JSON");
  fs::create_directories(layout / "blobs" / "sha256");
  const std::string repo = repository_of(reference);
  for (const auto& d : blobs_of(manifest, what)) {
    const fs::path file = blob_path(layout, d["digest"]);
    UniqueFd fd(::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    if (!fd) throw sys_error(what + ": creating " + file.string());
    registry.get_blob(repo, d["digest"], d["size"].get<std::uint64_t>(), [&](std::uint64_t at, const char* data, std::size_t n) {
      if (!write_all_at(fd.get(), std::string_view(data, n), at)) throw sys_error(what + ": writing " + file.string());
    });
  }
  write_file_atomic(blob_path(layout, m.digest), m.text, 0600);
  write_layout_top(layout, {{"mediaType", manifest.value("mediaType", m.media_type)},
                            {"digest", m.digest},
                            {"size", m.text.size()},
                            {"annotations", {{"org.opencontainers.image.ref.name", tag}}}});
}

}  // namespace nvproxy::checkpoint
