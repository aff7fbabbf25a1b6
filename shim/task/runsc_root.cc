#include "shim/task/runsc_root.h"

#include <system_error>

#include "shim/task/rootfs.h"

namespace nvproxy::shim {

namespace {
constexpr const char* kSandboxIdAnnotation = "io.kubernetes.cri.sandbox-id";
constexpr const char* kDefaultRunscRoot = "/run/containerd/runsc";
}  // namespace

std::string runsc_sandbox_of(const oci::Spec& spec, const std::string& id) {
  auto sandbox = spec.annotation(kSandboxIdAnnotation);
  return sandbox && !sandbox->empty() ? *sandbox : id;
}

oci::RuntimeConfig runsc_root_for_sandbox(oci::RuntimeConfig rc, const std::string& ns, const std::string& sandbox) {
  std::filesystem::path base = rc.root.empty() ? std::filesystem::path(kDefaultRunscRoot) / ns : std::filesystem::path(rc.root);
  rc.root = (base / sandbox).string();
  return rc;
}

bool remove_runsc_sandbox_root(const oci::RuntimeConfig& rc, const std::string& id) {
  std::filesystem::path root = rc.root;
  if (oci::runtime_kind_from_binary(rc.binary) != oci::RuntimeKind::Runsc) return false;
  if (rc.root.empty() || root.filename() != id) return false;  // another container's sandbox, or a shared root
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(root, ec))
    if (e.path().extension() == ".state") return false;  // a container of the sandbox is still there
  if (ec) return false;
  unmount_all(root);
  std::filesystem::remove_all(root, ec);
  return !ec;
}

}  // namespace nvproxy::shim
