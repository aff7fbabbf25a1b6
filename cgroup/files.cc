#include "cgroup/files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "common/error.h"
#include "common/unique_fd.h"

namespace nvproxy::cgroup {

namespace fs = std::filesystem;

std::optional<std::string> read_if_exists(const fs::path& p) {
  UniqueFd fd(::open(p.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) return std::nullopt;
    throw Error(Code::Unknown, "open " + p.string() + ": " + std::strerror(errno));
  }
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      if (errno == ENOENT || errno == ENODEV) return std::nullopt;  // the cgroup went away meanwhile
      throw Error(Code::Unknown, "read " + p.string() + ": " + std::strerror(errno));
    }
    if (n == 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

std::string read_or_missing(const fs::path& p) {
  auto s = read_if_exists(p);
  if (!s) throw Missing{};
  return *s;
}

std::string trim(std::string_view s) {
  auto b = s.find_first_not_of(" \t\n");
  if (b == std::string_view::npos) return {};
  auto e = s.find_last_not_of(" \t\n");
  return std::string(s.substr(b, e - b + 1));
}

std::vector<std::string> fields(std::string_view s) {
  std::vector<std::string> out;
  std::istringstream in{std::string(s)};
  std::string f;
  while (in >> f) out.push_back(f);
  return out;
}

// Every piece between separators, empty ones included (a last empty piece after a final "\n" too).
std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t at; (at = s.find(sep, start)) != std::string::npos; start = at + 1) out.push_back(s.substr(start, at - start));
  out.push_back(s.substr(start));
  return out;
}

std::vector<std::string> lines(std::string_view s) {
  std::vector<std::string> out;
  std::istringstream in{std::string(s)};
  std::string l;
  while (std::getline(in, l)) out.push_back(l);
  return out;
}

std::optional<uint64_t> strict_u64(std::string_view s) {
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

// An unsigned value as the cgroups library parses it: a negative number reads as 0.
std::optional<uint64_t> cgroup_u64(std::string_view s) {
  if (auto v = strict_u64(s)) return v;
  if (s.size() > 1 && s[0] == '-' && strict_u64(s.substr(1))) return 0;
  return std::nullopt;
}

uint64_t parse_u64(std::string_view s, const fs::path& file) {
  auto v = cgroup_u64(s);
  if (!v) throw Error(Code::Unknown, file.string() + ": \"" + std::string(s) + "\" is not a number");
  return *v;
}

uint64_t read_u64(const fs::path& p) {
  return parse_u64(trim(read_or_missing(p)), p);
}

bool read_kv_lines(const fs::path& p, const std::function<void(const std::string& key, const std::string& value)>& each) {
  auto text = read_if_exists(p);
  if (!text) return false;
  for (const auto& l : lines(*text)) {
    auto f = fields(l);
    if (f.size() != 2) throw Error(Code::Unknown, p.string() + ": line \"" + l + "\" is not \"KEY VALUE\"");
    each(f[0], f[1]);
  }
  return true;
}

// "KEY VALUE" lines, every line of them.
std::map<std::string, uint64_t> read_kv(const fs::path& p) {
  std::map<std::string, uint64_t> out;
  if (!read_kv_lines(p, [&](const std::string& k, const std::string& v) { out[k] = parse_u64(v, p); })) throw Missing{};
  return out;
}

std::map<std::string, uint64_t> read_cgroup_kv(const fs::path& file) {
  try {
    return read_kv(file);
  } catch (const Missing&) {
    return {};  // the statistics' marker, not an error: callers outside them know none
  }
}

std::optional<std::string> page_size_name(const std::string& dir_name) {
  auto dash = dir_name.find('-');
  if (dash == std::string::npos || dir_name.size() < dash + 4 || dir_name.substr(dir_name.size() - 2) != "kB")
    return std::nullopt;
  auto kb = strict_u64(std::string_view(dir_name).substr(dash + 1, dir_name.size() - dash - 3));
  if (!kb) return std::nullopt;
  static const char* const kUnits[] = {"B", "KB", "MB", "GB", "TB", "PB"};
  auto size = static_cast<double>(*kb) * 1024;
  size_t unit = 0;
  while (size >= 1024 && unit + 1 < std::size(kUnits)) {
    size /= 1024;
    ++unit;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g%s", size, kUnits[unit]);
  return std::string(buf);
}

}  // namespace nvproxy::cgroup
