// containerd's own checkpoint images (what `ctr c checkpoint` makes) between nodes through an OCI
// registry. containerd can neither push nor export them (a 400 from the registry, an export error:
// their index lists blobs that are not manifests), so the shim carries them: node A's checkpoint
// image is read through `ctr content get`, its memory pushed as the image artifact of
// image_layout.h (the store's entry, hard links) under REFERENCE's tag plus ".data", and REFERENCE
// itself gets a small artifact holding containerd's index as an OCI archive whose CRIU blob now
// refers to that data by digest. On node B, importing the archive (`ctr images import`) gives
// containerd the checkpoint image; `ctr c restore` then restores through the shim, which pulls the
// data into B's store (image_transfer.h) after checking its record.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>

#include "checkpoint/registry/image_registry.h"
#include "checkpoint/registry/image_transfer.h"
#include "common/process.h"

namespace nvproxy::checkpoint {

// The file in the small artifact that holds containerd's checkpoint image as an OCI archive.
inline constexpr const char* kCtrArchiveFile = "containerd-checkpoint.tar";

struct CtrTarget {
  std::string ctr = "ctr";
  std::string address = "/run/containerd/containerd.sock";
  std::string ns = "default";
  std::chrono::seconds timeout{300};  // each ctr call
};

// "host/repo:tag" -> "host/repo:tag.data" (no tag: "latest.data"); a digest reference is refused.
std::string data_reference_of(const std::string& reference);

struct CtrPushResult {
  PushResult data;      // the memory, pinned by digest
  std::string archive;  // REFERENCE pinned: what B imports
};

// Node A: containerd's checkpoint image `name` to `reference`. Error naming the image and the step.
CtrPushResult push_ctr_checkpoint(const std::string& name, const std::string& reference, const std::filesystem::path& store,
                                  const CtrTarget& ctr, ImageRegistry& registry, ProcessRunner& runner,
                                  const TransferOptions& opts = {});

// Node B: the archive of `reference` (its record checked by `check`, as any pull) imported into
// containerd; returns the checkpoint image's name. The data moves at the restore.
std::string pull_ctr_checkpoint(const std::string& reference, const std::filesystem::path& store, const CtrTarget& ctr,
                                ImageRegistry& registry, ProcessRunner& runner, const RecordCheck& check,
                                const TransferOptions& opts = {});

}  // namespace nvproxy::checkpoint
