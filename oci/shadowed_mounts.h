// Mounts that a later mount at the same destination hides. The container never sees them; runsc
// still keys the spec's mounts by destination and type when it restores, and refuses a checkpoint of
// a spec with two at one destination (containerd's own /dev/shm and a user's larger one).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace nvproxy::oci {

// The same place in the container: "/dev/shm", "/dev/shm/" and "/dev//shm" are one destination.
std::string normalize_destination(const std::string& destination);

// Removes from spec["mounts"] every mount that a later one at the same (normalized) destination
// shadows and returns, in spec order, a sentence for each naming both mounts ("mount 3 (tmpfs shm at
// /dev/shm) is shadowed by mount 7 (tmpfs at /dev/shm)"). A spec without
// mounts, or with malformed entries (left for the runtime to reject), is left as it is.
std::vector<std::string> drop_shadowed_mounts(nlohmann::json& spec);

}  // namespace nvproxy::oci
