#include "checkpoint/shared/proc_maps.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace nvproxy::checkpoint {

namespace {

// The whole of `text` as a hexadecimal number.
bool parse_hex(const std::string& text, std::uint64_t& out) {
  if (text.empty()) return false;
  char* end = nullptr;
  out = std::strtoull(text.c_str(), &end, 16);
  return *end == '\0';
}

}  // namespace

std::optional<MapsEntry> parse_maps_line(const std::string& line) {
  std::istringstream ls(line);
  std::string range, offset, inode;
  MapsEntry e;
  if (!(ls >> range >> e.perms >> offset >> e.dev >> inode)) return std::nullopt;
  const auto dash = range.find('-');
  if (dash == std::string::npos || !parse_hex(range.substr(0, dash), e.start) || !parse_hex(range.substr(dash + 1), e.end))
    return std::nullopt;
  parse_hex(offset, e.offset);
  e.inode = std::strtoull(inode.c_str(), nullptr, 10);
  std::string rest;
  std::getline(ls, rest);
  const auto b = rest.find_first_not_of(' ');
  if (b == std::string::npos) return e;
  e.path = rest.substr(b);
  static const std::string kDeleted = " (deleted)";
  if (e.path.size() > kDeleted.size() && e.path.compare(e.path.size() - kDeleted.size(), kDeleted.size(), kDeleted) == 0) {
    e.path.resize(e.path.size() - kDeleted.size());
    e.deleted = true;
  }
  return e;
}

std::optional<std::vector<MapsEntry>> read_maps(const std::filesystem::path& maps_file) {
  std::ifstream in(maps_file);
  if (!in) return std::nullopt;
  std::vector<MapsEntry> out;
  for (std::string line; std::getline(in, line);)
    if (auto e = parse_maps_line(line)) out.push_back(std::move(*e));
  return out;
}

}  // namespace nvproxy::checkpoint
