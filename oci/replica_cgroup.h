// The cgroup of a container restored from another container's image. `ctr containers restore`
// (and any client that restores an image into a new container) hands over the image's spec as it
// is, so its linux.cgroupsPath still names the container the image was taken from: every replica
// would join that one cgroup, share its limits, see each other's processes in `runc ps`, and one
// replica's `kill --all` would end them all. The replica gets the same path with its own name.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace nvproxy::oci {

// `path` with its last element renamed from `from` to `to`: "/ns/from" -> "/ns/to" (cgroupfs) and
// "slice:prefix:from" -> "slice:prefix:to" (systemd). nullopt when there is nothing to rename:
// `from` empty or equal to `to`, or a path whose last element is not `from` (a path the user
// chose, or one the client already made for this container, as Kubernetes' CRI does).
std::optional<std::string> replica_cgroups_path(std::string_view path, std::string_view from, std::string_view to);

// CRIU restores processes into the cgroup paths it dumped unless told the new root. runc gives it
// the container's cgroup as that root from 1.2 on; runc before 1.2 does so on cgroup v1 only, so on
// a cgroup v2 host a restore into another container's name lands in the image's old cgroup (seen
// on the H200: three replicas in one, `runc ps` of each empty). The CRIU configuration line that
// puts it right ("cgroup-root /ns/name"), for a cgroupfs path (absolute, no systemd "a:b:c");
// nullopt where runc does it itself or the path is not one to give.
std::optional<std::string> criu_cgroup_root_line(std::string_view cgroups_path, bool cgroup_v2, bool runc_before_1_2);

// Applies replica_cgroups_path to spec["linux"]["cgroupsPath"]; returns the sentence for the log, nullopt when the
// spec is left as it is.
std::optional<std::string> give_replica_its_cgroup(nlohmann::json& spec, const std::string& from, const std::string& to);

}  // namespace nvproxy::oci
