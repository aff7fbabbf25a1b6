#include "checkpoint/image/image_layout.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "checkpoint/image/layout_blobs.h"
#include "checkpoint/image/sha256.h"
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

std::string artifact_manifest_text(const std::vector<LayoutFile>& chunks, const std::string& record_text) {
  std::map<std::string, int> pieces;
  for (const auto& c : chunks) ++pieces[c.path];
  json layers = json::array();
  bool compressed = false;
  for (const auto& c : chunks) {
    json annotations{{"org.opencontainers.image.title", c.path}};
    if (pieces[c.path] > 1) annotations[kOffsetAnnotation] = std::to_string(c.offset);
    if (!c.zstd_digest.empty()) {
      annotations[kContentDigestAnnotation] = c.digest;
      annotations[kContentSizeAnnotation] = std::to_string(c.size);
      compressed = true;
    }
    layers.push_back({{"mediaType", c.zstd_digest.empty() ? kFileMediaType : kFileZstdMediaType},
                      {"digest", c.blob_digest()},
                      {"size", c.blob_size()},
                      {"annotations", annotations}});
  }
  json manifest{{"schemaVersion", 2},
                {"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                {"artifactType", compressed ? kArtifactTypeCompressed : kArtifactType},
                {"config", {{"mediaType", kRecordMediaType}, {"digest", sha256_of(record_text)}, {"size", record_text.size()}}},
                {"layers", layers},
                {"annotations", {{kRecordAnnotation, record_text}}}};
  return manifest.dump();
}

ArtifactManifest parse_artifact_manifest(const json& m) {
  auto bad = [](const std::string& why) { return Error(Code::InvalidArgument, "not a checkpoint image of this shim: " + why); };
  if (!m.is_object()) throw bad("the manifest is no JSON object");
  const std::string type = m.value("artifactType", std::string());
  if (type != kArtifactType && type != kArtifactTypeCompressed)
    throw bad("its artifact type is \"" + type + "\", not " + kArtifactType + " or " + kArtifactTypeCompressed);
  if (!m.contains("layers") || !m["layers"].is_array() || m["layers"].empty()) throw bad("it has no layers");
  ArtifactManifest out;
  std::set<std::pair<std::string, std::uint64_t>> seen;
  for (const auto& l : m["layers"]) {
    if (!l.is_object()) throw bad("a layer is no JSON object");
    std::string title, digest = l.value("digest", std::string());
    if (l.contains("annotations") && l["annotations"].is_object())
      title = l["annotations"].value("org.opencontainers.image.title", std::string());
    if (!valid_title(title)) throw bad("a layer's title \"" + title + "\" is not a path inside the image");
    const json none = json::object();
    const json& notes = l.contains("annotations") && l["annotations"].is_object() ? l["annotations"] : none;
    // A decimal annotation: nullopt when absent.
    auto number = [&](const char* key) -> std::optional<std::uint64_t> {
      if (!notes.contains(key)) return std::nullopt;
      const json& o = notes[key];
      const std::string text = o.is_string() ? o.get<std::string>() : std::string();
      if (text.empty() || text.size() > 19 || !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }))
        throw bad("layer \"" + title + "\" has the " + key + " \"" + text + "\"");
      return std::stoull(text);
    };
    const std::uint64_t offset = number(kOffsetAnnotation).value_or(0);
    if (!seen.insert({title, offset}).second) throw bad("two layers are titled \"" + title + "\" at one offset");
    if (!valid_digest(digest)) throw bad("layer \"" + title + "\" has the digest \"" + digest + "\"");
    if (!l.contains("size") || !l["size"].is_number_integer() || l["size"].get<std::int64_t>() < 0)
      throw bad("layer \"" + title + "\" has no size");
    LayoutFile f{.path = title, .digest = digest, .size = l["size"].get<std::uint64_t>(), .offset = offset};
    const std::string media = l.value("mediaType", std::string(kFileMediaType));
    if (media == kFileZstdMediaType) {
      f.zstd_digest = f.digest;
      f.zstd_size = f.size;
      f.digest = notes.value(kContentDigestAnnotation, std::string());
      const auto size = number(kContentSizeAnnotation);
      if (!valid_digest(f.digest) || !size) throw bad("the compressed layer \"" + title + "\" lacks its content digest or size");
      f.size = *size;
    } else if (media != kFileMediaType) {
      throw bad("layer \"" + title + "\" is of the media type \"" + media + "\"");
    }
    out.files.push_back(std::move(f));
  }
  // Each file's chunks tile it: sorted by offset, each begins where the last ended.
  std::stable_sort(out.files.begin(), out.files.end(), [](const LayoutFile& a, const LayoutFile& b) {
    return a.path != b.path ? a.path < b.path : a.offset < b.offset;
  });
  for (std::size_t i = 0; i < out.files.size(); ++i) {
    const auto& f = out.files[i];
    const std::uint64_t expect = (i > 0 && out.files[i - 1].path == f.path) ? out.files[i - 1].offset + out.files[i - 1].size : 0;
    if (f.offset != expect)
      throw bad("the chunks of \"" + f.path + "\" leave a gap or overlap at " + std::to_string(std::min(f.offset, expect)));
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

std::map<std::string, std::uint64_t> file_sizes(const ArtifactManifest& m) {
  std::map<std::string, std::uint64_t> out;
  for (const auto& f : m.files) out[f.path] = std::max(out[f.path], f.offset + f.size);
  return out;
}

}  // namespace nvproxy::checkpoint
