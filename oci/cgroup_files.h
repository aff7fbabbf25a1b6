// The files of a cgroup as containerd's cgroups library reads them, for the statistics of
// cgroup_metrics_v1.cc and cgroup_metrics_v2.cc: a missing file, numbers as the library parses
// them, "KEY VALUE" files, rdma entries and huge page size names.
#pragma once

#include <google/protobuf/repeated_ptr_field.h>

#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace nvproxy::oci::cgroup_files {

// A cgroup file that does not exist: the controller's part of the statistics ends there.
struct Missing {};

// The file's text; nullopt where it does not exist (or went away while read). Throws Error(Unknown).
std::optional<std::string> read_if_exists(const std::filesystem::path& p);
// The file's text; throws Missing where it does not exist.
std::string read_or_missing(const std::filesystem::path& p);
std::string trim(std::string_view s);
// Whitespace-separated fields.
std::vector<std::string> fields(std::string_view s);
// Every piece between separators, empty ones included (a last empty piece after a final "\n" too).
std::vector<std::string> split(const std::string& s, char sep);
std::vector<std::string> lines(std::string_view s);
std::optional<uint64_t> strict_u64(std::string_view s);
// An unsigned value as the cgroups library parses it: a negative number reads as 0.
std::optional<uint64_t> cgroup_u64(std::string_view s);
// cgroup_u64, or Error(Unknown) naming the file.
uint64_t parse_u64(std::string_view s, const std::filesystem::path& file);
uint64_t read_u64(const std::filesystem::path& p);
// "KEY VALUE" lines, every line of them; throws Missing, or Error(Unknown) naming a line that is not.
std::map<std::string, uint64_t> read_kv(const std::filesystem::path& p);
// "hugepages-2048kB" -> "2MB", as the cgroups library names page sizes.
std::optional<std::string> page_size_name(const std::string& dir_name);

// Runs one controller's part; a missing file ends it and keeps what it filled so far.
template <class F>
void controller(F&& f) {
  try {
    f();
  } catch (const Missing&) {
  }
}

// rdma.current / rdma.max lines ("DEVICE hca_handle=N hca_object=N"; "max" is 2^32-1).
template <class Entry>
void rdma_entries(const std::vector<std::string>& ls, google::protobuf::RepeatedPtrField<Entry>& out) {
  for (const auto& l : ls) {
    auto f = fields(l);
    if (f.size() != 3) continue;
    auto* e = out.Add();
    e->set_device(f[0]);
    for (size_t i = 1; i < 3; ++i) {
      auto eq = f[i].find('=');
      if (eq == std::string::npos || f[i].find('=', eq + 1) != std::string::npos) continue;
      std::string k = f[i].substr(0, eq), v = f[i].substr(eq + 1);
      std::optional<uint64_t> n = v == "max" ? std::optional<uint64_t>(std::numeric_limits<uint32_t>::max()) : cgroup_u64(v);
      if (!n || *n > std::numeric_limits<uint32_t>::max()) continue;
      if (k == "hca_handle") e->set_hca_handles(static_cast<uint32_t>(*n));
      if (k == "hca_object") e->set_hca_objects(static_cast<uint32_t>(*n));
    }
  }
}

}  // namespace nvproxy::oci::cgroup_files
