// The two halves of metrics_from_cgroup (cgroup_metrics.h): containerd's v1 and v2 Metrics, and
// what both fill the same way.
#pragma once

#include <google/protobuf/repeated_ptr_field.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "cgroup/files.h"
#include "oci/cgroup_metrics.h"
#include "proto/cgroups_v1.pb.h"
#include "proto/cgroups_v2.pb.h"

namespace nvproxy::oci {

io::containerd::cgroups::v1::Metrics v1_metrics(const cgroup::CgroupPaths& paths, const CgroupHost& host);
io::containerd::cgroups::v2::Metrics v2_metrics(const cgroup::CgroupPaths& paths, const CgroupHost& host);

// rdma.current / rdma.max lines ("DEVICE hca_handle=N hca_object=N"; "max" is 2^32-1).
template <class Entry>
void rdma_entries(const std::vector<std::string>& ls, google::protobuf::RepeatedPtrField<Entry>& out) {
  for (const auto& l : ls) {
    auto f = cgroup::fields(l);
    if (f.size() != 3) continue;
    auto* e = out.Add();
    e->set_device(f[0]);
    for (size_t i = 1; i < 3; ++i) {
      auto eq = f[i].find('=');
      if (eq == std::string::npos || f[i].find('=', eq + 1) != std::string::npos) continue;
      std::string k = f[i].substr(0, eq), v = f[i].substr(eq + 1);
      std::optional<uint64_t> n =
          v == "max" ? std::optional<uint64_t>(std::numeric_limits<uint32_t>::max()) : cgroup::cgroup_u64(v);
      if (!n || *n > std::numeric_limits<uint32_t>::max()) continue;
      if (k == "hca_handle") e->set_hca_handles(static_cast<uint32_t>(*n));
      if (k == "hca_object") e->set_hca_objects(static_cast<uint32_t>(*n));
    }
  }
}

}  // namespace nvproxy::oci
