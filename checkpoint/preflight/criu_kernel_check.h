// CRIU against this kernel, before any CUDA toggle: since Linux 6.16 the kernel refuses
// getsockopt(SO_PASSCRED) on sockets other than unix, netlink and bluetooth ones (EOPNOTSUPP), and
// CRIU before 4.2 reads it while dumping every inet socket: its dump fails ("sockets: Can't get
// 1:16 opt: Operation not supported", runc: "criu failed: type NOTIFY errno 0"). Measured with
// Debian 13's CRIU 4.1.1 on kernel 6.18 and a TCP listener; CRIU 4.2.1 dumps it. A container
// without inet sockets checkpoints with CRIU 4.1 all the same, so only then is it refused.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "checkpoint/preflight/snapshot_check.h"

namespace nvproxy::checkpoint {

// Why this CRIU cannot dump inet sockets on this kernel (one sentence, with both versions and the
// fix); nullopt when it can, or when a version is unknown (then the dump itself will tell).
std::optional<std::string> criu_kernel_conflict(const std::string& criu_version, const std::string& kernel_release);

// uname(2)'s release ("6.18.44-fc-v1045").
std::string kernel_release();

class CriuKernelCheck final : public SnapshotCheck {
 public:
  // criu_binary/criu_version: what the runtime will run (oci::CriuInfo); an empty version is unknown.
  CriuKernelCheck(std::string criu_binary, std::string criu_version, std::string kernel, std::filesystem::path proc = "/proc")
      : binary_(std::move(criu_binary)), version_(std::move(criu_version)), kernel_(std::move(kernel)), proc_(std::move(proc)) {}
  // Refuses when the versions conflict and `pids` hold an inet socket; details under "criu".
  std::optional<SnapshotProblem> check(const std::vector<pid_t>& pids) override;

 private:
  std::string binary_, version_, kernel_;
  std::filesystem::path proc_;
};

}  // namespace nvproxy::checkpoint
