#include "checkpoint/registry/blob_sources.h"

#include <cctype>
#include <nlohmann/json.hpp>

#include "checkpoint/registry/chunk_transfer.h"
#include "checkpoint/registry/registry_reference.h"
#include "common/fs.h"
#include "common/text.h"

namespace nvproxy::checkpoint {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kPushRecord = ".pushed.json";

std::string host_of(const std::string& repo) {
  try {
    return parse_reference(repo + ":x").host;
  } catch (const std::exception&) {
    return {};
  }
}

// `text` as an artifact manifest, or nothing when it is not one.
std::optional<ArtifactManifest> parsed(const json& j) {
  try {
    return parse_artifact_manifest(j);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace

fs::path registry_repo_dir(const fs::path& store, const std::string& repo) {
  std::string flat;  // "host:5000/team/llm" -> "host_5000_team_llm"
  for (char c : repo) flat += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.') ? c : '_';
  return store / "registry" / flat;
}

BlobSources BlobSources::in_store(const fs::path& store, const std::string& repo) {
  BlobSources out;
  const std::string host = host_of(repo);
  if (store.empty() || host.empty()) return out;
  auto take = [&](const std::string& from, const json& manifest) {
    if (from == repo || host_of(from) != host) return;
    if (auto m = parsed(manifest)) out.add(from, *m);
  };
  std::error_code ec;
  for (const auto& dir : fs::directory_iterator(store / "registry", ec)) {
    try {
      if (fs::exists(dir.path() / kPushRecord, ec)) {
        const json rec = json::parse(read_file(dir.path() / kPushRecord));
        take(rec.at("repository").get<std::string>(), rec.at("manifest"));
      }
    } catch (const std::exception&) {  // an unreadable record: only an upload more
    }
    for (const auto& entry : fs::directory_iterator(dir.path(), ec)) {
      // What a pull read from a repository is there, whether or not the pull finished.
      if (!fs::exists(entry.path() / kSourceFile, ec)) continue;
      try {
        take(trim(read_file(entry.path() / kSourceFile)), json::parse(read_file(entry.path() / kManifestFile)));
      } catch (const std::exception&) {
      }
    }
  }
  return out;
}

void BlobSources::add(const std::string& repo, const ArtifactManifest& m) {
  for (const auto& f : m.files) where_.emplace(f.blob_digest(), repo);
}

const std::string* BlobSources::find(const std::string& blob_digest) const {
  auto it = where_.find(blob_digest);
  return it == where_.end() ? nullptr : &it->second;
}

void record_push(const fs::path& store, const std::string& repo, const PushRecord& rec) noexcept {
  if (store.empty()) return;
  try {
    const fs::path dir = registry_repo_dir(store, repo);
    fs::create_directories(dir);
    const json j{{"repository", repo},
                 {"configured_chunk_bytes", rec.configured_chunk_bytes},
                 {"chunk_bytes", rec.chunk_bytes},
                 {"manifest", json::parse(rec.manifest_text)}};
    write_file_atomic(dir / kPushRecord, j.dump(), 0600);
  } catch (const std::exception&) {
  }
}

std::uint64_t raised_chunk_bytes(const fs::path& store, const std::string& repo, std::uint64_t configured) noexcept {
  if (store.empty()) return 0;
  try {
    const json j = json::parse(read_file(registry_repo_dir(store, repo) / kPushRecord));
    const auto used = j.value("chunk_bytes", std::uint64_t{0});
    if (j.value("configured_chunk_bytes", std::uint64_t{0}) == configured && used > configured) return used;
  } catch (const std::exception&) {  // none, or unreadable: the usual size
  }
  return 0;
}

}  // namespace nvproxy::checkpoint
