#include "checkpoint/registry/image_transfer.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "checkpoint/image/image_layout.h"
#include "checkpoint/image/image_store.h"
#include "checkpoint/registry/blob_sources.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/text.h"
#include "common/unique_fd.h"

namespace nvproxy::checkpoint {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string hex_of(const std::string& digest) {
  return digest.substr(digest.find(':') + 1);
}

// The kernel's id of this boot: a pulled entry marked with it was written since the host last
// started, so its unsynced pages are still in the page cache or on the disk.
std::string boot_id(const TransferOptions& opts) {
  if (!opts.boot_id.empty()) return opts.boot_id;
  try {
    return trim(read_file("/proc/sys/kernel/random/boot_id"));
  } catch (const std::exception&) {
    return "unknown";
  }
}

constexpr const char* kComplete = ".complete";
constexpr const char* kBootLine = "boot ";

// The line of `.complete` that ties an entry to this boot.
std::string boot_line(const TransferOptions& opts) {
  return kBootLine + boot_id(opts) + "\n";
}

// Whether the finished entry can be used: written in this boot, or verified now (and then marked
// so: what was read back after a boot is on the disk).
bool usable(const fs::path& entry, const std::string& digest, const TransferOptions& opts) {
  std::string mark;
  try {
    mark = read_file(entry / kComplete);
  } catch (const std::exception&) {
    return false;
  }
  const auto at = mark.find(kBootLine);
  if (at == std::string::npos) return true;  // verified after a boot, or written by 0.6.0 (synced)
  if (mark.compare(at, std::string::npos, boot_line(opts)) == 0) return true;
  if (!verify_pulled(entry, std::max(1, opts.streams))) return false;
  write_file_atomic(entry / kComplete, digest + "\n", 0600);
  return true;
}

// `p` is `dir` or below it, symlinks and relative paths (the command line's) resolved.
bool within(const fs::path& p, const fs::path& dir) {
  if (dir.empty()) return false;
  std::error_code ec;
  return path_within(fs::weakly_canonical(dir, ec), fs::weakly_canonical(p, ec));
}

// Free bytes where `dir` is.
std::uint64_t free_bytes(const fs::path& dir) {
  struct statvfs st {};
  if (::statvfs(dir.c_str(), &st) != 0) throw sys_error("statvfs " + dir.string());
  return static_cast<std::uint64_t>(st.f_bavail) * st.f_frsize;
}

}  // namespace

std::string repository_of(const std::string& reference) {
  std::string r = reference.substr(0, reference.find('@'));
  auto colon = r.rfind(':'), slash = r.rfind('/');
  if (colon != std::string::npos && (slash == std::string::npos || colon > slash)) r.resize(colon);
  return r;
}

PushResult push_image(const fs::path& dir, const fs::path& store, const std::string& reference, bool rewrite,
                      ImageRegistry& registry, const TransferOptions& opts) {
  if (auto ref = read_image_ref(dir); ref && !ref->registry.empty())
    throw Error(Code::InvalidArgument, dir.string() + " already refers to the registry image " + ref->registry);
  const fs::path image = resolve_image(dir, store);
  if (rewrite && image == dir && within(dir, store))
    throw Error(Code::InvalidArgument, dir.string() + " is an entry of the image store: --rewrite would empty it");
  const std::string repo = repository_of(reference);
  TransferOptions cut = opts;
  cut.last_chunk_bytes = raised_chunk_bytes(store, repo, opts.chunk_bytes);
  const ChunkPush p = push_chunked(image, reference, registry, cut, BlobSources::in_store(store, repo));
  record_push(store, repo,
              {.manifest_text = p.manifest, .configured_chunk_bytes = opts.chunk_bytes, .chunk_bytes = p.chunk_bytes});
  PushResult out{.pinned = repo + "@" + p.digest,
                 .bytes = p.bytes,
                 .sent = p.sent,
                 .skipped = p.skipped,
                 .mounted = p.mounted,
                 .wire = p.wire,
                 .files = p.files,
                 .chunks = p.chunks,
                 .summary = p.summary};
  if (rewrite) {
    const auto rec = read_image_record(image);
    refer_to_registry(dir, out.pinned, rec ? rec->container : std::string());
  }
  return out;
}

namespace {

struct Remote {
  ImageRegistry::Manifest manifest;
  ArtifactManifest artifact;
};

Remote remote_manifest(const std::string& reference, const fs::path& store, ImageRegistry& registry) {
  const std::string what = "the registry image " + reference;
  if (store.empty())
    throw Error(Code::FailedPrecondition, what + " needs an image store on this node to land in (checkpoint.image_store)");
  Remote r{.manifest = registry.manifest(reference), .artifact = {}};
  if (auto at = reference.find('@'); at != std::string::npos && reference.substr(at + 1) != r.manifest.digest)
    throw Error(Code::DataLoss, what + ": the registry answered a manifest of digest " + r.manifest.digest);
  json parsed = json::parse(r.manifest.text, nullptr, false);
  try {
    r.artifact = parse_artifact_manifest(parsed);
  } catch (const Error& e) {
    throw Error(e.code(), what + " is " + e.what());
  }
  return r;
}

}  // namespace

std::optional<ImageRecord> remote_record(const std::string& reference, const fs::path& store, ImageRegistry& registry) {
  return remote_manifest(reference, store, registry).artifact.record;
}

fs::path pull_image(const std::string& reference, const fs::path& store, ImageRegistry& registry, const RecordCheck& check,
                    const TransferOptions& opts, ChunkPull* report) {
  const std::string what = "the registry image " + reference;
  const Remote r = remote_manifest(reference, store, registry);
  const ImageRegistry::Manifest& remote = r.manifest;
  const ArtifactManifest& m = r.artifact;
  if (check) check(m.record);  // refused here, before the bulk moves

  const std::string repo = repository_of(reference);
  const fs::path repo_dir = registry_repo_dir(store, repo);
  fs::create_directories(repo_dir);
  fs::path entry = repo_dir / hex_of(remote.digest);
  // Replicas restored at once pull once: the first holds the lock, the others then find the entry.
  UniqueFd lock(::open((repo_dir / (hex_of(remote.digest) + ".lock")).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!lock || ::flock(lock.get(), LOCK_EX) != 0) throw sys_error("locking " + entry.string());
  std::error_code ec;
  if (fs::exists(entry / kComplete, ec)) {
    if (usable(entry, remote.digest, opts)) return entry;
    fs::remove_all(entry, ec);  // not whole after a boot: pulled again
  }

  std::uint64_t need = 0;
  for (const auto& f : m.files) need += f.size;
  const std::uint64_t have = free_bytes(repo_dir);
  if (have < need + need / 20)
    throw Error(Code::FailedPrecondition, what + " needs " + std::to_string(need >> 20) + " MiB (and 5 % room) in the store " +
                                              store.string() + ", which has " + std::to_string(have >> 20) + " MiB free");
  // Kept when the pull fails: the next one resumes with the chunks not yet whole.
  const fs::path incoming = repo_dir / (".incoming-" + hex_of(remote.digest));
  std::vector<fs::path> earlier;
  for (const auto& pulled_from : fs::directory_iterator(store / "registry", ec))
    for (const auto& e : fs::directory_iterator(pulled_from.path(), ec))
      if (fs::exists(e.path() / kComplete, ec)) earlier.push_back(e.path());  // each chunk copied is checked
  const ChunkPull pulled = pull_chunked(repo, m, incoming, earlier, registry, opts);
  if (report) *report = pulled;
  write_file_atomic(incoming / kManifestFile, remote.text, 0600);
  write_file_atomic(incoming / kSourceFile, repo + "\n", 0600);  // for pushes elsewhere
  for (const auto& [path, size] : file_sizes(m)) {
    (void)size;
    fs::permissions(incoming / path, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace, ec);
  }
  write_file_atomic(incoming / kComplete, remote.digest + "\n" + boot_line(opts), 0600);
  fs::remove_all(entry, ec);
  fs::rename(incoming, entry, ec);
  if (ec) throw Error(Code::Internal, "cannot move the pulled image into " + entry.string() + ": " + ec.message());
  return entry;
}

}  // namespace nvproxy::checkpoint
