// Where checkpoint images travel: an OCI registry, behind an interface so that the transfer logic
// (image_transfer.h) is tested without one. SkopeoRegistry is the real one.
#pragma once

#include <filesystem>
#include <string>

namespace nvproxy::checkpoint {

class ImageRegistry {
 public:
  virtual ~ImageRegistry() = default;
  // The manifest's JSON text at `reference` ("host/repo:tag" or "host/repo@sha256:..."), and its
  // digest. Nothing else is fetched. Error naming the reference and the registry's answer.
  struct Manifest {
    std::string text;
    std::string digest;  // "sha256:..."
  };
  virtual Manifest manifest(const std::string& reference) = 0;
  // Pushes the layout's image tagged `tag` to `reference`; returns the pushed manifest's digest.
  virtual std::string push(const std::filesystem::path& layout, const std::string& tag, const std::string& reference) = 0;
  // Pulls `reference` into `layout` under `tag`, every blob's digest checked while it streams.
  virtual void pull(const std::string& reference, const std::filesystem::path& layout, const std::string& tag) = 0;
};

}  // namespace nvproxy::checkpoint
