// A gVisor pod's /dev/shm inside its sandbox. CRI binds the pod's shm directory of the host
// (containerd's sandboxes/<id>/shm) at /dev/shm in the sandbox container and in every container of
// the pod; under runsc such a bind is a gofer mount, whose files stay on the host: a checkpoint
// of the sandbox saves no byte of them, and a restore on another node fails in runsc once a
// process had one open (Python multiprocessing's sem.mp-* files: "vfs.CompleteRestore() failed
// ... failed to walk "sem.mp-..." ... in mount "llm:/dev/shm""). So, as gVisor's own containerd
// shim does (pkg/shim/v1/utils/volumes.go, configureShm), the sandbox container's spec carries
// runsc's mount hint for that directory (a tmpfs shared by the pod: the
// dev.gvisor.spec.mount.<name>.source/type/share/options annotations) and every container of the
// pod mounts /dev/shm as tmpfs from that source. runsc then keeps one tmpfs per pod inside the
// sandbox, which its checkpoint saves with the sandbox's memory. runsc validates the hint's type,
// share and options across a restore, not its source (the new pod's own directory).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace nvproxy::shim {

// The hint's name: one no pod's volume takes (gVisor's shim uses the same).
inline constexpr const char* kRunscPodShmHint = "gvisorinternaldevshm";

// Edits the spec of a container of a CRI pod under runsc (io.kubernetes.cri.container-type
// sandbox or container) as above: its /dev/shm bind of the pod's directory becomes a tmpfs mount,
// and the sandbox container's spec gets the hint. Returns what was done, for the log; nullopt
// when the spec is left as it is: not a CRI pod's, no /dev/shm bind, the host's /dev/shm (host
// IPC: shared with the host, not the pod's), or a hint of the spec's own already naming the source.
std::optional<std::string> share_pod_shm_in_sandbox(nlohmann::json& spec);

}  // namespace nvproxy::shim
