// The files of a cgroup as containerd's cgroups library reads them: a missing file, numbers as the
// library parses them, "KEY VALUE" files (memory.stat, memory.events, cpu.stat: one reader of them,
// read_kv_lines, whoever asks) and huge page size names. oci/'s statistics (cgroup_metrics_v1.cc,
// cgroup_metrics_v2.cc) and checkpoint/'s memory limits read a cgroup through these.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace nvproxy::cgroup {

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
// Every line of a "KEY VALUE" file, in order, as its two fields; false where the file does not
// exist. Throws Error(Unknown) naming the file and a line that is not "KEY VALUE" (one being
// written, say), after the lines before it were given to `each`.
bool read_kv_lines(const std::filesystem::path& p,
                   const std::function<void(const std::string& key, const std::string& value)>& each);
// "KEY VALUE" lines, every line of them; throws Missing, or Error(Unknown) naming a line that is not.
std::map<std::string, uint64_t> read_kv(const std::filesystem::path& p);
// The same where a missing file reads as empty (no Missing: callers outside the statistics know
// none). Throws Error(Unknown) as read_kv.
std::map<std::string, uint64_t> read_cgroup_kv(const std::filesystem::path& file);
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

}  // namespace nvproxy::cgroup
