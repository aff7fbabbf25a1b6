// The registry client and transfer settings of the shim's config (checkpoint.registry_*), for the
// `image` command and for restores that pull: one place reads them.
#pragma once

#include <functional>
#include <string>

#include "checkpoint/config.h"
#include "checkpoint/image/chunk_transfer.h"
#include "checkpoint/image/http_registry.h"

namespace nvproxy::shim {

// Error(InvalidArgument) naming the key when streams or the chunk size is 0.
checkpoint::RegistryOptions registry_options(const checkpoint::CheckpointConfig& cfg);
checkpoint::TransferOptions transfer_options(const checkpoint::CheckpointConfig& cfg, checkpoint::TransferProgress::Sink progress,
                                             bool terminal);

}  // namespace nvproxy::shim
