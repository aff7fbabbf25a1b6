// /proc/PID/maps, read in one place: the device-holder scan, the comm probe, the CRIU dump checks,
// the zero-page count and the agent's drop in place each look at a process's mappings.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace nvproxy::checkpoint {

// One line: "7f00-7f10 rw-s 00001000 00:05 12   /dev/nvidia0 (deleted)".
struct MapsEntry {
  std::uint64_t start = 0, end = 0;  // the range [start, end)
  std::string perms;                 // "rw-s"
  std::uint64_t offset = 0;
  std::string dev;  // "00:05"
  std::uint64_t inode = 0;
  // The 6th field onwards, spaces inside kept, without the " (deleted)" of a removed file: what a
  // holder's path is and what drop_in_place matches ranges by. Empty for an anonymous mapping;
  // "[heap]", "anon_inode:[io_uring]" and the like for the kernel's own.
  std::string path;
  bool deleted = false;  // the path ended in " (deleted)"
};

// nullopt for a line that is not a maps line (fewer than five fields, a range that is not hex-hex).
std::optional<MapsEntry> parse_maps_line(const std::string& line);
// Every entry of a maps file (PROC/PID/maps), lines that do not parse skipped; nullopt if the file
// cannot be read (the process is gone).
std::optional<std::vector<MapsEntry>> read_maps(const std::filesystem::path& maps_file);

}  // namespace nvproxy::checkpoint
