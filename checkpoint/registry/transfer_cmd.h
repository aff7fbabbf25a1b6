// nvproxy-image-transfer: the registry's side of checkpoint images, a program of its own so that
// no container's daemon links an HTTP, TLS or zstd stack (image/image_puller.h says why). The shim
// runs it; it reads no configuration of its own: every setting comes as an option.
//
// For the operator, through `containerd-shim-nvproxy-v1 image push|pull` (the shim passes its
// configuration's checkpoint.registry_* and image_store as options; the output is the user's):
//   push DIR REFERENCE [--rewrite]              the image DIR holds or refers to (image_transfer.h)
//   push --ctr NAME REFERENCE [CTR OPTIONS]     containerd's checkpoint image (ctr_checkpoint.h)
//   push --kube ARCHIVE REFERENCE               a kubelet's checkpoint archive (kube_checkpoint.h)
//   pull REFERENCE [OUT]                        into the store (its record printed first); OUT refers to it
//   pull --ctr REFERENCE [CTR OPTIONS]          imported into containerd; the data moves at the restore
// For the shim's restore (one JSON answer on stdout, image/transfer_wire.h; progress on stderr):
//   record REFERENCE                            the record the manifest carries: {"record": RECORD|null}
//   fetch REFERENCE                             pulled into the store: {"entry": DIR}
//   fetch-kube REFERENCE INTO                   a Kubernetes checkpoint image unpacked below INTO:
//                                               {"container": NAME, "dir": DIR}
// Options: --store S, --tls-verify=true|false, --authfile F, --timeout-s N (one blob or manifest),
// --streams N, --chunk-mib N, --compress none|zstd; ctr options: --address SOCKET, --namespace NS.
// Exit status 0, 1 on an error, 2 on a usage error.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace nvproxy::checkpoint {

int image_transfer_cmd(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace nvproxy::checkpoint
