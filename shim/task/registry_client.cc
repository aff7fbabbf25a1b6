#include "shim/task/registry_client.h"

#include "common/error.h"

namespace nvproxy::shim {

checkpoint::RegistryOptions registry_options(const checkpoint::CheckpointConfig& cfg) {
  return {.tls_verify = cfg.registry_tls_verify,
          .authfile = cfg.registry_authfile,
          .timeout = std::chrono::seconds(cfg.registry_timeout_s)};
}

checkpoint::TransferOptions transfer_options(const checkpoint::CheckpointConfig& cfg, checkpoint::TransferProgress::Sink progress,
                                             bool terminal) {
  if (cfg.registry_streams == 0 || cfg.registry_streams > 64)
    throw Error(Code::InvalidArgument, "checkpoint.registry_streams is " + std::to_string(cfg.registry_streams) + ": 1 to 64");
  if (cfg.registry_chunk_mib == 0)
    throw Error(Code::InvalidArgument, "checkpoint.registry_chunk_mib is 0: a chunk holds at least one MiB");
  if (!cfg.known_registry_compression())
    throw Error(Code::InvalidArgument, "checkpoint.registry_compression is \"" + cfg.registry_compression + "\": none or zstd");
  return {.streams = static_cast<int>(cfg.registry_streams),
          .chunk_bytes = static_cast<std::uint64_t>(cfg.registry_chunk_mib) << 20,
          .zstd = cfg.registry_compression == "zstd",
          .progress = std::move(progress),
          .terminal = terminal};
}

}  // namespace nvproxy::shim
