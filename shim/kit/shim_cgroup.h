// Moving the shim daemon into the cgroup the client asked for (runc options' shim_cgroup), as
// containerd's runc shim does in `start`: the cgroup must exist; on a unified host it is one
// directory, on a v1 (or hybrid) host the pid joins that path in every hierarchy that has it.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>

namespace nvproxy::shim {

// Throws Error (NotFound when the cgroup exists nowhere) naming the cgroup and the file written.
void join_shim_cgroup(pid_t pid, const std::string& cgroup, const std::filesystem::path& cgroup_root = "/sys/fs/cgroup");

}  // namespace nvproxy::shim
