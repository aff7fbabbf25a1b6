// Where checkpoint images travel: an OCI registry (the distribution API's manifests and blobs),
// behind an interface so that the transfer logic (image_transfer.h, layout_transfer.h) is tested
// without one. HttpRegistry (http_registry.h) is the real one. Every call is safe from several
// threads at once: a push or pull runs one stream per thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace nvproxy::checkpoint {

class ImageRegistry {
 public:
  virtual ~ImageRegistry() = default;
  struct Manifest {
    std::string text;
    std::string digest;      // "sha256:..." of exactly `text`
    std::string media_type;  // what the registry said it is
  };
  // The manifest at `reference` ("host/repo:tag" or "host/repo@sha256:..."). Error naming the
  // reference and the registry's answer; DataLoss when a pinned reference answers other bytes.
  virtual Manifest manifest(const std::string& reference) = 0;
  // Stores `text` at `reference` ("host/repo:tag"); returns its digest.
  virtual std::string put_manifest(const std::string& reference, const std::string& media_type, const std::string& text) = 0;
  // Whether `repo` ("host/repo") already holds the blob.
  virtual bool has_blob(const std::string& repo, const std::string& digest) = 0;
  // Fills `buf` with up to `n` bytes of the blob from `at`; returns how many (0 only at its end).
  using Reader = std::function<std::size_t(std::uint64_t at, char* buf, std::size_t n)>;
  // Uploads the `size` bytes `read` gives; the registry checks them against `digest`.
  virtual void put_blob(const std::string& repo, const std::string& digest, std::uint64_t size, const Reader& read) = 0;
  // Asks the registry to link the blob `from` ("host/repo" on the same registry) holds into `repo`
  // (a cross-repository mount: no bytes move). true when it did; false for any refusal (not
  // there, not allowed, a registry that mounts nothing): the caller uploads it instead.
  virtual bool mount_blob(const std::string& repo, const std::string& digest, const std::string& from) = 0;
  // Receives the blob's bytes in order, `at` their place in the blob.
  using Writer = std::function<void(std::uint64_t at, const char* data, std::size_t n)>;
  // Streams the blob to `write`, its digest and size checked as it streams: Error(DataLoss) naming
  // the blob when what arrived is not it (what was written is then to be thrown away).
  virtual void get_blob(const std::string& repo, const std::string& digest, std::uint64_t size, const Writer& write) = 0;
};

}  // namespace nvproxy::checkpoint
