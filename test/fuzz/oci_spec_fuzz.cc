// The OCI spec loader: Spec::parse (JSON + validate_spec), then every accessor the shim calls on a
// spec that passed validation, validate_process on the process (as Exec does), and the rootfs path
// joined under a bundle (join_within).
// Only nvproxy::Error may come out (conventions.md): an accessor throwing nlohmann's type_error on a
// validated spec means validation let through something the shim cannot read.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/error.h"
#include "common/fs.h"
#include "oci/spec.h"

using namespace nvproxy;

namespace {
void check(bool ok) {
  if (!ok) std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    oci::Spec s = oci::Spec::parse(text, "config.json");
    const auto& j = s.json();
    (void)s.terminal();
    (void)s.annotations();
    (void)s.annotation("io.kubernetes.cri.sandbox-id");
    (void)s.env("NVIDIA_VISIBLE_DEVICES");
    (void)s.env("PATH");
    (void)s.own_pid_namespace();
    (void)s.cgroups_path();
    std::string root = s.root_path();
    check(!root.empty());
    (void)j.dump();
    // The rootfs of a bundle: relative paths resolve under it and may not climb out.
    try {
      std::filesystem::path bundle = "/run/containerd/io.containerd.runtime.v2.task/k8s.io/c1";
      auto p = join_within(bundle, root);
      check(path_within(bundle, p));
      for (const auto& c : p) check(c != "..");
    } catch (const Error&) {
    }
    if (j.contains("process")) oci::validate_process(j["process"], "config.json");
  } catch (const Error&) {
  }
  // Exec hands a bare process spec to validate_process.
  auto p = nlohmann::json::parse(text, nullptr, false);
  if (!p.is_discarded()) {
    try {
      oci::validate_process(p, "exec \"e1\"");
      check(p["args"].is_array() && !p["args"].empty());
    } catch (const Error&) {
    }
  }
  return 0;
}
