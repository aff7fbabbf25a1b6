// Where runsc keeps a container's state: a --root per sandbox. runsc looks a container id up by
// prefix (release-20260817: "id \"web\" is ambiguous" beside "web2" in the same root, even with an
// exact match), so containers of different sandboxes never share a root: only the containers of
// one sandbox (a Kubernetes pod) do, and CRI names those by 64-hex ids. The root is
// <configured root or /run/containerd/runsc>/<namespace>/<sandbox id>; `runsc --root THAT list`
// shows the sandbox's containers.
#pragma once

#include <filesystem>
#include <string>

#include "oci/runtime.h"
#include "oci/spec.h"

namespace nvproxy::shim {

// The sandbox a container belongs to: CRI's sandbox-id annotation (the pause container carries
// its own id there), else the container itself (ctr, nerdctl, docker: one container per sandbox).
std::string runsc_sandbox_of(const oci::Spec& spec, const std::string& id);

// rc (already per-namespace, runtime_for_namespace) with its root made the sandbox's.
oci::RuntimeConfig runsc_root_for_sandbox(oci::RuntimeConfig rc, const std::string& ns, const std::string& sandbox);

// After the runtime's delete of container `id`: when rc is runsc, rc.root is that container's own
// sandbox root and runsc left no container's state in it, unmounts what runsc bound there (its
// null-netns file) and removes the directory; true when it did. Never throws; any other runtime,
// or a root another container still uses, is left as it is (false).
bool remove_runsc_sandbox_root(const oci::RuntimeConfig& rc, const std::string& id);

}  // namespace nvproxy::shim
