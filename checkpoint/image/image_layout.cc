#include "checkpoint/image/image_layout.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "checkpoint/image/layout_blobs.h"
#include "common/error.h"
#include "common/fs.h"

namespace nvproxy::checkpoint {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

bool valid_digest(const std::string& d) {
  if (d.size() != 7 + 64 || d.rfind("sha256:", 0) != 0) return false;
  return std::all_of(d.begin() + 7, d.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// A title may name a file below the image, nothing else: no absolute path, no "..", no empty part.
bool valid_title(const std::string& t) {
  if (t.empty() || t.front() == '/' || t.size() > 4096) return false;
  for (const auto& part : fs::path(t))
    if (part.empty() || part == "." || part == ".." || part == "/") return false;
  return true;
}

// Links `from` to `to`; across filesystems (a checkpoint directory outside the store) it copies.
void link_or_copy(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  if (fs::exists(to, ec)) return;  // two files of the same bytes: one blob
  fs::create_hard_link(from, to, ec);
  if (!ec) return;
  if (ec != std::errc::cross_device_link)
    throw Error(Code::Internal, "cannot link " + from.string() + " to " + to.string() + ": " + ec.message());
  fs::copy_file(from, to, ec);
  if (ec) throw Error(Code::Internal, "cannot copy " + from.string() + " to " + to.string() + ": " + ec.message());
}

}  // namespace

std::vector<LayoutFile> digest_files(const fs::path& image_dir, ProcessRunner& runner) {
  std::vector<LayoutFile> files;
  std::uint64_t total = 0;
  for (const auto& e : fs::recursive_directory_iterator(image_dir)) {
    if (e.is_directory()) continue;
    if (!e.is_regular_file())
      throw Error(Code::InvalidArgument, "the image " + image_dir.string() + " holds " + e.path().string() +
                                             ", which is not a regular file: it cannot travel as a blob");
    files.push_back({.path = fs::relative(e.path(), image_dir).string(), .size = e.file_size()});
    total += files.back().size;
  }
  std::sort(files.begin(), files.end(), [](const LayoutFile& a, const LayoutFile& b) { return a.path < b.path; });
  if (files.empty()) throw Error(Code::InvalidArgument, "the image " + image_dir.string() + " holds no file");
  Command c{.argv = {"sha256sum", "--"}, .cwd = image_dir.string(), .timeout = std::chrono::seconds(60 + total / (200ull << 20))};
  for (const auto& f : files) c.argv.push_back(f.path);
  RunResult r = runner.run(c);
  if (!r.ok()) throw Error(Code::Internal, "sha256sum of the image " + image_dir.string() + ": " + r.describe());
  // One line per file, in argument order: "<64 hex>  <name>".
  std::istringstream in(r.out);
  std::string line;
  for (auto& f : files) {
    if (!std::getline(in, line) || line.size() < 66 || line.substr(66) != f.path)
      throw Error(Code::Internal, "sha256sum of the image " + image_dir.string() + ": unexpected output for " + f.path);
    f.digest = "sha256:" + line.substr(0, 64);
  }
  return files;
}

std::string write_layout(const fs::path& image_dir, const fs::path& layout_dir, ProcessRunner& runner) {
  std::vector<LayoutFile> files = digest_files(image_dir, runner);
  fs::create_directories(layout_dir / "blobs" / "sha256");
  std::string record = "{}";
  if (auto rec = read_image_record(image_dir)) record = to_json(*rec).dump();
  const std::string config_digest = add_blob_text(record, layout_dir, runner).digest;

  json layers = json::array();
  for (const auto& f : files) {
    link_or_copy(image_dir / f.path, blob_path(layout_dir, f.digest));
    layers.push_back({{"mediaType", kFileMediaType},
                      {"digest", f.digest},
                      {"size", f.size},
                      {"annotations", {{"org.opencontainers.image.title", f.path}}}});
  }
  json manifest{{"schemaVersion", 2},
                {"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                {"artifactType", kArtifactType},
                {"config", {{"mediaType", kRecordMediaType}, {"digest", config_digest}, {"size", record.size()}}},
                {"layers", layers},
                {"annotations", {{kRecordAnnotation, record}}}};
  std::string text = manifest.dump();
  const LayoutFile m = add_blob_text(text, layout_dir, runner);
  write_layout_top(layout_dir, {{"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                                {"digest", m.digest},
                                {"size", m.size},
                                {"annotations", {{"org.opencontainers.image.ref.name", kLayoutTag}}}});
  return text;
}

ArtifactManifest parse_artifact_manifest(const json& m) {
  auto bad = [](const std::string& why) { return Error(Code::InvalidArgument, "not a checkpoint image of this shim: " + why); };
  if (!m.is_object()) throw bad("the manifest is no JSON object");
  if (m.value("artifactType", std::string()) != kArtifactType)
    throw bad("its artifact type is \"" + m.value("artifactType", std::string()) + "\", not " + kArtifactType);
  if (!m.contains("layers") || !m["layers"].is_array() || m["layers"].empty()) throw bad("it has no layers");
  ArtifactManifest out;
  std::set<std::string> seen;
  for (const auto& l : m["layers"]) {
    if (!l.is_object()) throw bad("a layer is no JSON object");
    std::string title, digest = l.value("digest", std::string());
    if (l.contains("annotations") && l["annotations"].is_object())
      title = l["annotations"].value("org.opencontainers.image.title", std::string());
    if (!valid_title(title)) throw bad("a layer's title \"" + title + "\" is not a path inside the image");
    if (!seen.insert(title).second) throw bad("two layers are titled \"" + title + "\"");
    if (!valid_digest(digest)) throw bad("layer \"" + title + "\" has the digest \"" + digest + "\"");
    if (!l.contains("size") || !l["size"].is_number_integer() || l["size"].get<std::int64_t>() < 0)
      throw bad("layer \"" + title + "\" has no size");
    out.files.push_back({.path = title, .digest = digest, .size = l["size"].get<std::uint64_t>()});
  }
  if (m.contains("annotations") && m["annotations"].is_object() && m["annotations"].contains(kRecordAnnotation)) {
    json rec = json::parse(m["annotations"][kRecordAnnotation].get<std::string>(), nullptr, false);
    if (rec.is_discarded() || !rec.is_object()) throw bad("its record annotation is not JSON");
    if (!rec.empty()) {
      try {
        out.record = image_record_from_json(rec);
      } catch (const std::exception& e) {
        throw bad(std::string("its record: ") + e.what());
      }
    }
  }
  return out;
}

void image_from_layout(const fs::path& layout_dir, const ArtifactManifest& m, const fs::path& image_dir) {
  // Check everything first: nothing is moved out of a layout that is not whole.
  for (const auto& f : m.files) {
    fs::path blob = blob_path(layout_dir, f.digest);
    std::error_code ec;
    auto size = fs::file_size(blob, ec);
    if (ec) throw Error(Code::DataLoss, "the pulled image lacks " + f.path + " (blob " + f.digest + ")");
    if (size != f.size)
      throw Error(Code::DataLoss, "the pulled image's " + f.path + " has " + std::to_string(size) + " bytes, its manifest says " +
                                      std::to_string(f.size));
  }
  fs::create_directories(image_dir);
  std::map<std::string, int> uses;
  for (const auto& f : m.files) ++uses[f.digest];
  for (const auto& f : m.files) {
    fs::path to = image_dir / f.path;
    fs::create_directories(to.parent_path());
    fs::path blob = blob_path(layout_dir, f.digest);
    std::error_code ec;
    if (--uses[f.digest] > 0)
      fs::create_hard_link(blob, to, ec);  // the same bytes under another name: the blob serves both
    else
      fs::rename(blob, to, ec);
    if (ec) throw Error(Code::Internal, "cannot move " + blob.string() + " to " + to.string() + ": " + ec.message());
    fs::permissions(to, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace, ec);
  }
}

}  // namespace nvproxy::checkpoint
