#include "checkpoint/image/image_store.h"

#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <nlohmann/json.hpp>

#include "checkpoint/image/image_record.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/json_integer.h"

namespace nvproxy::checkpoint {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// "20261202T041500.123456789Z-4711": sorts by time, unique per shim process and moment.
std::string entry_name() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  tm t{};
  ::gmtime_r(&ts.tv_sec, &t);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%S", &t);
  char full[96];
  std::snprintf(full, sizeof full, "%s.%09ldZ-%d", buf, ts.tv_nsec, static_cast<int>(::getpid()));
  return full;
}

std::string rfc3339_now() {
  std::time_t now = std::time(nullptr);
  tm t{};
  ::gmtime_r(&now, &t);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &t);
  return buf;
}

// A store-relative entry path: no "..", not absolute, three parts.
bool plain_entry(const std::string& entry) {
  fs::path p(entry);
  if (entry.empty() || p.is_absolute()) return false;
  int parts = 0;
  for (const auto& part : p) {
    if (part == ".." || part == "." || part.empty()) return false;
    ++parts;
  }
  return parts == 3;
}

void make_private_dir(const fs::path& d) {
  std::error_code ec;
  fs::create_directories(d, ec);
  if (ec || !fs::is_directory(d))
    throw Error(Code::Internal, "cannot create the image store directory " + d.string() + ": " + ec.message());
  fs::permissions(d, fs::perms::owner_all, fs::perm_options::replace, ec);
}

std::vector<fs::path> sorted_dirs(const fs::path& d) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(d, ec))
    if (e.is_directory(ec)) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// When an entry was last written: its directory's time or its newest file's. A pull fills its
// files in place (no directory change) and appends to its journal, so an unfinished pull that is
// still moving looks new however long ago it began.
std::optional<fs::file_time_type> last_written(const fs::path& entry) {
  std::error_code ec;
  auto t = fs::last_write_time(entry, ec);
  if (ec) return std::nullopt;
  for (const auto& e : fs::directory_iterator(entry, ec)) {
    std::error_code fec;
    auto ft = e.last_write_time(fec);
    if (!fec) t = std::max(t, ft);
  }
  return t;
}

}  // namespace

fs::path ImageStore::create(const std::string& ns, const std::string& container) {
  if (ns.empty() || container.empty() || ns.find('/') != std::string::npos || container.find('/') != std::string::npos)
    throw Error(Code::InvalidArgument,
                "image store: namespace \"" + ns + "\" / container \"" + container + "\" cannot name an entry");
  make_private_dir(dir_);
  fs::path owner = dir_ / ns / container;
  make_private_dir(owner);
  fs::path entry = owner / entry_name();
  std::error_code ec;
  if (!fs::create_directory(entry, ec))
    throw Error(Code::Internal,
                "cannot create the image store entry " + entry.string() + ": " + (ec ? ec.message() : "it exists"));
  fs::permissions(entry, fs::perms::owner_all, fs::perm_options::replace, ec);
  return entry;
}

void ImageStore::refer(const fs::path& client_dir, const fs::path& entry, const std::string& container) const {
  json j{{"version", ImageRef::kLocalVersion},
         {"store", dir_.string()},
         {"entry", fs::relative(entry, dir_).string()},
         {"container", container},
         {"created", rfc3339_now()}};
  std::error_code ec;
  fs::create_directories(client_dir, ec);
  write_file_atomic(client_dir / kImageRefFile, j.dump(2) + "\n");
  fs::path record = entry / ImageRecord::kFileName;
  if (fs::exists(record, ec)) {
    fs::copy_file(record, client_dir / ImageRecord::kFileName, fs::copy_options::overwrite_existing, ec);
    if (ec) throw Error(Code::Internal, "cannot copy " + record.string() + " to " + client_dir.string() + ": " + ec.message());
  }
}

void ImageStore::discard(const fs::path& entry) const noexcept {
  std::error_code ec;
  fs::remove_all(entry, ec);
}

std::vector<fs::path> ImageStore::retain(const std::string& ns, const std::string& container) const {
  std::vector<fs::path> entries = sorted_dirs(dir_ / ns / container), removed;
  if (entries.size() <= keep_) return removed;
  for (std::size_t i = 0; i + keep_ < entries.size(); ++i) {
    discard(entries[i]);
    removed.push_back(entries[i]);
  }
  return removed;
}

void refer_to_entry(const fs::path& store, const fs::path& client_dir, const fs::path& entry, const std::string& container) {
  ImageStore(store, 1).refer(client_dir, entry, container);
}

std::vector<fs::path> prune_store(const fs::path& store, std::chrono::seconds age) {
  return ImageStore(store, 1).prune_older_than(age);
}

std::vector<fs::path> ImageStore::prune_older_than(std::chrono::seconds age) const {
  std::vector<fs::path> removed;
  auto cutoff = fs::file_time_type::clock::now() - age;
  for (const auto& ns : sorted_dirs(dir_))
    for (const auto& owner : sorted_dirs(ns))
      for (const auto& entry : sorted_dirs(owner)) {
        auto t = last_written(entry);
        if (!t || *t > cutoff) continue;
        discard(entry);
        removed.push_back(entry);
      }
  return removed;
}

std::optional<ImageRef> read_image_ref(const fs::path& dir) {
  fs::path file = dir / kImageRefFile;
  std::error_code ec;
  if (!fs::exists(file, ec)) return std::nullopt;
  json j = json::parse(read_file(file), nullptr, false);
  const bool remote = j.is_object() && j.contains("registry");
  if (remote && (!j["registry"].is_string() || j["registry"].get<std::string>().find("@sha256:") == std::string::npos))
    throw Error(Code::InvalidArgument,
                "image reference " + file.string() + " is malformed (\"registry\" must be host/repo@sha256:...)");
  if (!remote && (j.is_discarded() || !j.is_object() || !j.contains("store") || !j.contains("entry") || !j["store"].is_string() ||
                  !j["entry"].is_string()))
    throw Error(Code::InvalidArgument, "image reference " + file.string() + " is malformed (it needs \"store\" and \"entry\")");
  ImageRef r;
  try {
    r.version = json_integer_or(j, "version", 0);
    r.container = j.value("container", std::string());
    r.created = j.value("created", std::string());
  } catch (const std::exception& e) {
    throw Error(Code::InvalidArgument, "image reference " + file.string() + " is malformed: " + e.what());
  }
  if (r.version > ImageRef::kVersion)
    throw Error(Code::InvalidArgument, "image reference " + file.string() + " has version " + std::to_string(r.version) +
                                           ", newer than this shim's: restore with a newer shim");
  if (remote) {
    r.registry = j["registry"].get<std::string>();
  } else {
    r.store = j["store"].get<std::string>();
    r.entry = j["entry"].get<std::string>();
  }
  return r;
}

void refer_to_registry(const fs::path& dir, const std::string& pinned, const std::string& container) {
  json j{{"version", ImageRef::kRegistryVersion}, {"registry", pinned}, {"container", container}, {"created", rfc3339_now()}};
  for (const auto& e : std::vector<fs::directory_entry>(fs::directory_iterator(dir), fs::directory_iterator{})) {
    if (e.path().filename() == ImageRecord::kFileName || e.path().filename() == kImageRefFile) continue;
    std::error_code ec;
    fs::remove_all(e.path(), ec);
    if (ec) throw Error(Code::Internal, "cannot remove " + e.path().string() + ": " + ec.message());
  }
  write_file_atomic(dir / kImageRefFile, j.dump(2) + "\n");
}

fs::path resolve_image(const fs::path& dir, const fs::path& store) {
  std::optional<ImageRef> ref = read_image_ref(dir);
  if (!ref) return dir;
  if (!ref->registry.empty())
    throw Error(Code::FailedPrecondition, "the checkpoint image " + dir.string() + " is the registry image " + ref->registry +
                                              ": pull it first (a restore through the shim does)");
  const std::string what =
      "the checkpoint image " + dir.string() + " refers to entry " + ref->entry + " of the image store " + ref->store;
  if (store.empty()) throw Error(Code::FailedPrecondition, what + ", but this shim has no image store (checkpoint.image_store)");
  std::error_code ec;
  if (fs::weakly_canonical(ref->store, ec) != fs::weakly_canonical(store, ec))
    throw Error(Code::FailedPrecondition,
                what + ", not this shim's store " + store.string() + " (an image from another host: move it with `image pack`)");
  if (!plain_entry(ref->entry)) throw Error(Code::InvalidArgument, what + ": the entry is not a store entry's name");
  fs::path entry = store / ref->entry;
  if (!fs::is_directory(entry, ec))
    throw Error(Code::FailedPrecondition, what + ", which is gone (removed by the store's retention or `image prune`?)");
  return entry;
}

std::uintmax_t pack_image(const fs::path& dir, const fs::path& store, const fs::path& out) {
  fs::path src = resolve_image(dir, store);
  std::error_code ec;
  if (!fs::is_directory(src, ec)) throw Error(Code::InvalidArgument, src.string() + " is no directory");
  // A copy into the image itself would copy itself without end.
  std::string from = fs::weakly_canonical(src, ec).string(), to = fs::weakly_canonical(out, ec).string();
  if (to == from || to.rfind(from + "/", 0) == 0 || from.rfind(to + "/", 0) == 0)
    throw Error(Code::InvalidArgument, out.string() + " and the image " + src.string() + " overlap");
  if (fs::exists(out, ec) && !fs::is_empty(out, ec)) throw Error(Code::InvalidArgument, out.string() + " is not empty");
  fs::create_directories(out, ec);
  if (ec) throw Error(Code::Internal, "cannot create " + out.string() + ": " + ec.message());
  std::uintmax_t bytes = 0;
  std::vector<fs::directory_entry> entries(fs::recursive_directory_iterator(src), fs::recursive_directory_iterator{});
  for (const auto& e : entries) {
    fs::path to = out / fs::relative(e.path(), src);
    if (e.is_directory()) {
      fs::create_directories(to);
    } else {
      fs::copy_file(e.path(), to, fs::copy_options::overwrite_existing, ec);
      if (ec) throw Error(Code::Internal, "cannot copy " + e.path().string() + ": " + ec.message());
      bytes += e.file_size();
    }
  }
  return bytes;
}

}  // namespace nvproxy::checkpoint
