// The shim's side of nvproxy-image-transfer (checkpoint/registry/transfer_cmd.h), the program that
// speaks to registries: the daemon links no HTTP, TLS or zstd. One place turns the configuration
// (checkpoint.registry_*, image_transfer, image_transfer_timeout_s) into the program's options,
// for the `image` command and for restores that pull.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "checkpoint/config.h"
#include "checkpoint/image/image_puller.h"
#include "common/log.h"
#include "common/process.h"

namespace nvproxy::shim {

// checkpoint.image_transfer, else nvproxy-image-transfer beside the shim, then in
// /usr/libexec/containerd-shim-nvproxy/.
std::string image_transfer_path(const checkpoint::CheckpointConfig& cfg);

// The program's registry options from the configuration (and the store, when not empty).
std::vector<std::string> registry_args(const checkpoint::CheckpointConfig& cfg, const std::string& store);

// An ImagePuller that runs the program, each run under the configured deadline, in a process
// group of its own: on expiry the group is killed and reaped, and the call throws
// DeadlineError(DeadlineExceeded) naming the image, `who` and the deadline. The program's
// progress lines go to the log. Every Error starts with `who` (the container and what it does)
// and names the image; a program that cannot be run is Error(FailedPrecondition) saying why.
class TransferProgram final : public checkpoint::ImagePuller {
 public:
  TransferProgram(const checkpoint::CheckpointConfig& cfg, ProcessRunner& runner, Logger& log, std::string who);
  std::filesystem::path pull(const std::string& reference, const std::filesystem::path& store,
                             const checkpoint::RecordCheck& check) override;
  checkpoint::KubeCheckpoint fetch_kube(const std::string& reference, const std::filesystem::path& into) override;

 private:
  // The program's answer to `args` about `reference` (transfer_wire.h).
  nlohmann::json run(const std::vector<std::string>& args, const std::string& reference, const std::string& store);

  const checkpoint::CheckpointConfig& cfg_;
  ProcessRunner& runner_;
  Logger& log_;
  std::string who_;
  std::string program_;
  std::chrono::milliseconds timeout_;
};

}  // namespace nvproxy::shim
