// `containerd-shim-nvproxy-v1 image`: the operator's side of the image store (checkpoint/image/image_store.h).
//
//   image pack DIR OUT [--store S] [--config F]   a self-contained copy of the image DIR refers to
//                                                 (a checkpoint directory holding a reference), for
//                                                 another host or to keep it from the retention
//   image prune --older-than HOURS [--store S] [--config F]
//                                                 removes store entries older than that
//   image push DIR REFERENCE [--rewrite]          pushes the image DIR holds or refers to into a
//                                                 registry (checkpoint/registry/image_transfer.h); --rewrite
//                                                 then makes DIR refer to the pushed image
//   image pull REFERENCE [OUT]                    pulls it into the store (its record printed
//                                                 first); OUT gets a reference to the entry
//   registry options: --tls-verify=true|false, --authfile F (else checkpoint.registry_* of the config)
//   push and pull exec nvproxy-image-transfer (checkpoint/registry/transfer_cmd.h) in this process,
//   with the configuration's registry settings and store as its options: the shim links no
//   registry client.
//
// The store is --store, else checkpoint.image_store of the shim's config (--config, else the file
// the shim reads). Exit status 0, 1 on an error, 2 on a usage error.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace nvproxy::shim {

int image_cmd(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace nvproxy::shim
