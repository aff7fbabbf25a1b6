// How the shim's side gets an image out of a registry without speaking to the registry itself.
// The registry's protocol (HTTP, TLS, auth, chunks, zstd: checkpoint/registry/) runs in
// nvproxy-image-transfer, a program of its own, so that no container's daemon links it and a bug
// in it cannot take a container's shim down. The daemon's ImagePuller runs that program under a
// deadline (shim/task/registry_client.h); the program implements the same contracts with the
// registry client in-process (registry/image_transfer.h: pull_image, registry/kube_restore.h:
// fetch_kube_checkpoint), and tests stand a puller of their own in.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "checkpoint/image/image_record.h"
#include "checkpoint/image/kube_archive.h"

namespace nvproxy::checkpoint {

// Runs on the record a registry's manifest carries, before the bulk moves; refuses by throwing.
using RecordCheck = std::function<void(const std::optional<ImageRecord>&)>;

class ImagePuller {
 public:
  virtual ~ImagePuller() = default;
  // The store entry holding `reference` (pulled now, or by an earlier pull), `check` run on the
  // manifest's record first: registry/image_transfer.h's pull_image.
  virtual std::filesystem::path pull(const std::string& reference, const std::filesystem::path& store,
                                     const RecordCheck& check) = 0;
  // The Kubernetes checkpoint image `reference` unpacked below `into` (the caller's to remove):
  // registry/kube_restore.h's fetch_kube_checkpoint.
  virtual KubeCheckpoint fetch_kube(const std::string& reference, const std::filesystem::path& into) = 0;
};

}  // namespace nvproxy::checkpoint
