// Where a shim listens: a path socket under /run/containerd/s (0700 dir, 0600 socket, never
// abstract), named by a hash of containerd's address, the namespace and the grouping id so that
// containers of one pod (same io.kubernetes.cri.sandbox-id) find the same shim.
#pragma once

#include <filesystem>
#include <string>

#include "common/unique_fd.h"

namespace nvproxy::shim {

inline constexpr const char* kSocketDir = "/run/containerd/s";

std::string socket_path(const std::string& containerd_address, const std::string& ns, const std::string& group_id,
                        const std::string& dir = kSocketDir);
// Binds and listens; refuses paths longer than sun_path allows. Throws Error naming the path.
UniqueFd listen_unix(const std::string& path);
bool can_connect(const std::string& path);
// "unix:///run/..." -> "/run/..."
std::string strip_unix_scheme(const std::string& address);

}  // namespace nvproxy::shim
