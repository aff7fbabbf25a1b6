// ImageRegistry through skopeo (containers/image: the registry protocol, auth files, TLS, retries,
// and every blob's digest checked while it streams). Each call has a deadline; on expiry skopeo is
// killed and the call fails with DeadlineExceeded.
#pragma once

#include <chrono>
#include <string>

#include "checkpoint/image/image_registry.h"
#include "common/process.h"

namespace nvproxy::checkpoint {

struct RegistryOptions {
  std::string skopeo = "skopeo";  // looked up in PATH
  bool tls_verify = true;         // false: plain HTTP or unverified TLS (a registry on loopback)
  std::string authfile;           // empty: skopeo's default (${XDG_RUNTIME_DIR}/containers/auth.json)
  // skopeo's signature policy; where it is missing, copies run with --insecure-policy (the digests
  // are what is checked).
  std::string policy_file = "/etc/containers/policy.json";
  std::chrono::seconds timeout{3600};
};

class SkopeoRegistry final : public ImageRegistry {
 public:
  SkopeoRegistry(RegistryOptions opts, ProcessRunner& runner) : opts_(std::move(opts)), runner_(runner) {}
  Manifest manifest(const std::string& reference) override;
  std::string push(const std::filesystem::path& layout, const std::string& tag, const std::string& reference) override;
  void pull(const std::string& reference, const std::filesystem::path& layout, const std::string& tag) override;

 private:
  RunResult run(std::vector<std::string> args, const std::string& what, std::chrono::seconds timeout);
  RegistryOptions opts_;
  ProcessRunner& runner_;
};

}  // namespace nvproxy::checkpoint
