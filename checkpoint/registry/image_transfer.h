// Checkpoint images between nodes through an OCI registry (image_layout.h gives the form).
//
// push: the image a checkpoint directory holds or refers to (the store's entry) is pushed in chunks
// straight from its files (chunk_transfer.h): no second copy on the node that took it. Chunks
// another repository of the registry holds, as the store knows from its pulls and pushes, are
// mounted from there (blob_sources.h). With `rewrite` the directory then holds a registry
// reference instead (nvproxy-image-ref.json, version 2): a few hundred bytes that travel in
// containerd's or the kubelet's checkpoint archive.
//
// pull: the manifest first, whose record (GPU, driver, runtime, CRIU) the caller's preflight checks
// against this node before any bulk moves; then the chunks straight into this node's store (digests
// checked while they stream, written in place), once per manifest digest: replicas restored from
// one reference share the entry. A failed pull leaves its chunks in .incoming-<digest>, never an
// entry: the next pull of that image resumes there.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "checkpoint/image/image_puller.h"
#include "checkpoint/image/image_record.h"
#include "checkpoint/registry/chunk_transfer.h"
#include "checkpoint/registry/image_registry.h"
#include "common/process.h"

namespace nvproxy::checkpoint {

// "host/repo:tag" -> "host/repo"; "host/repo@sha256:..." -> "host/repo"; "host:5000/repo" stays.
std::string repository_of(const std::string& reference);

struct PushResult {
  std::string pinned;                              // "host/repo@sha256:...": what a restore elsewhere refers to
  std::uint64_t bytes = 0, sent = 0, skipped = 0;  // of the image's own bytes
  std::uint64_t mounted = 0;                       // of `skipped`: mounted from other repositories
  std::uint64_t wire = 0;                          // uploaded (compressed where it was)
  int files = 0, chunks = 0;
  std::string summary;  // bytes sent and already there, the rate
};

PushResult push_image(const std::filesystem::path& dir, const std::filesystem::path& store, const std::string& reference,
                      bool rewrite, ImageRegistry& registry, const TransferOptions& opts = {});

// The store entry holding `reference` (pulled now, or by an earlier pull). `check` runs on the
// manifest's record before the bulk and refuses by throwing. Error(FailedPrecondition) without a
// store or without room for the image; Error(DataLoss) when what arrived is not what the manifest
// says. The pull syncs nothing (a restore reads it from the page cache right after): the entry's
// `.complete` names the boot it was written in, and an entry of another boot (the host went down,
// maybe before its pages reached the disk) is verified chunk by chunk before it is used, and
// pulled again where it is not whole.
// What pull_image's `check` is given, alone: the record of the manifest at `reference`, after the
// same refusals before it (no store, a pinned reference answering other bytes, not an image of
// this form). What nvproxy-image-transfer answers the shim before it pulls.
std::optional<ImageRecord> remote_record(const std::string& reference, const std::filesystem::path& store,
                                         ImageRegistry& registry);

std::filesystem::path pull_image(const std::string& reference, const std::filesystem::path& store, ImageRegistry& registry,
                                 const RecordCheck& check, const TransferOptions& opts = {}, ChunkPull* report = nullptr);

}  // namespace nvproxy::checkpoint
