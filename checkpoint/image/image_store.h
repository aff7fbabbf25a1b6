// The shim's own image store (checkpoint.image_store): one copy of a checkpoint on disk, whatever
// path the client takes.
//
// containerd copies an image the runtime wrote: `ctr c checkpoint` and Docker pack the directory it
// handed the shim into its content store, containerd 1.6/1.7 do so even for `--image-path` with a
// runtime not named io.containerd.runc.*, and a restore unpacks the blob into a temporary directory
// again. For a 40 GiB process that is two or three times the image on disk and in time. With a store,
// CRIU (or runsc) writes the image into STORE/NAMESPACE/CONTAINER/ENTRY and the directory containerd
// handed over gets only a small reference (nvproxy-image-ref.json, beside a copy of the image's
// nvproxy-cuda.json): containerd packs a few hundred bytes, and the restore of that reference reads
// the entry where it is.
//
// Trade-offs (docs/architecture.md): such an image is restorable on this host only, until
// `containerd-shim-nvproxy-v1 image pack` makes a self-contained copy of it; containerd never tells a
// shim that it dropped a checkpoint, so entries are not reference-counted: the newest
// checkpoint.image_store_keep of each container are kept, older ones removed at its next
// checkpoint, and `image prune` removes entries by age; the store holds process memory, so it is
// created 0700, root's.
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace nvproxy::checkpoint {

inline constexpr const char* kImageRefFile = "nvproxy-image-ref.json";

struct ImageRef {
  static constexpr int kLocalVersion = 1;            // what a reference into the store is written as
  static constexpr int kRegistryVersion = 2;         // what a reference into a registry is written as
  static constexpr int kVersion = kRegistryVersion;  // the newest this shim reads
  int version = kLocalVersion;
  std::string store;  // the store's directory on the host that wrote it
  std::string entry;  // NAMESPACE/CONTAINER/NAME, relative to the store
  // Version 2: the image is in a registry, "host/repo@sha256:..." (image_transfer.h); store and
  // entry are empty. A shim before 0.6.0 refuses it as too new.
  std::string registry;
  std::string container;
  std::string created;  // RFC 3339, UTC
};

class ImageStore {
 public:
  // keep: entries kept per container after a checkpoint (at least 1).
  ImageStore(std::filesystem::path dir, unsigned keep) : dir_(std::move(dir)), keep_(keep == 0 ? 1 : keep) {}
  [[nodiscard]] const std::filesystem::path& dir() const { return dir_; }

  // A fresh, empty entry for one checkpoint of `container` in `ns`. Throws Error naming the path.
  std::filesystem::path create(const std::string& ns, const std::string& container);
  // Writes the reference to `entry` into `client_dir` (the directory containerd handed over), with
  // a copy of the entry's nvproxy-cuda.json if there is one. Throws Error naming the file.
  void refer(const std::filesystem::path& client_dir, const std::filesystem::path& entry, const std::string& container) const;
  // Removes a failed checkpoint's entry; never throws.
  void discard(const std::filesystem::path& entry) const noexcept;
  // Removes the container's entries but the newest `keep` (this entry among them); returns them.
  std::vector<std::filesystem::path> retain(const std::string& ns, const std::string& container) const;
  // Removes every entry older than `age`; returns them.
  std::vector<std::filesystem::path> prune_older_than(std::chrono::seconds age) const;

 private:
  std::filesystem::path dir_;
  unsigned keep_;
};

// `image pull REFERENCE OUT`: OUT refers to `entry` of `store` (ImageStore::refer).
void refer_to_entry(const std::filesystem::path& store, const std::filesystem::path& client_dir,
                    const std::filesystem::path& entry, const std::string& container);
// `image prune --older-than`: every entry of `store` older than `age` removed (by age alone: no
// container's retention is asked); returns them.
std::vector<std::filesystem::path> prune_store(const std::filesystem::path& store, std::chrono::seconds age);

// Makes `dir` refer to the registry image `pinned` ("host/repo@sha256:...") instead of what it held:
// every file but the record (nvproxy-cuda.json) is removed. Throws Error naming the file.
void refer_to_registry(const std::filesystem::path& dir, const std::string& pinned, const std::string& container);

// The reference in `dir`, nullopt when there is none (a self-contained image). Throws
// Error(InvalidArgument) naming the file when it is malformed.
std::optional<ImageRef> read_image_ref(const std::filesystem::path& dir);

// The directory the runtime restores from: `dir` itself when it holds a whole image, else the store
// entry its reference names (a registry reference is pulled first: image_transfer.h). The entry must be in `store` (this shim's
// configured store: an image cannot point a restore anywhere else on the host) and still exist; Error(FailedPrecondition) says
// which is not so.
std::filesystem::path resolve_image(const std::filesystem::path& dir, const std::filesystem::path& store);

// A self-contained copy of the image `dir` refers to (or holds), in `out` (created, must be empty or
// missing): for another host, or to keep it apart from the store's retention. Returns bytes copied.
std::uintmax_t pack_image(const std::filesystem::path& dir, const std::filesystem::path& store, const std::filesystem::path& out);

}  // namespace nvproxy::checkpoint
