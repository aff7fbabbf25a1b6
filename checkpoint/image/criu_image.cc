#include "checkpoint/image/criu_image.h"

#include <cstring>
#include <system_error>

#include "common/error.h"
#include "common/fs.h"

namespace nvproxy::checkpoint::criu {

namespace {

constexpr std::uint32_t kCommonMagic = 0x54564319;
constexpr std::uint32_t kServiceMagic = 0x55105940;  // the work directory's files (stats-*)
// One message: CRIU's largest (a core entry with its registers) is a few KiB.
constexpr std::uint32_t kMaxEntryBytes = 16u << 20;

std::string at(const std::string& what, std::size_t off) {
  return what + " at byte " + std::to_string(off);
}

// Reads a base-128 varint at `pos`, advancing it; false when the bytes end first or it is too long.
bool varint(std::string_view b, std::size_t& pos, std::uint64_t& out) {
  out = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (pos >= b.size()) return false;
    const auto byte = static_cast<unsigned char>(b[pos++]);
    out |= std::uint64_t{byte & 0x7fu} << shift;
    if ((byte & 0x80u) == 0) return true;
  }
  return false;
}

std::uint32_t le32(const char* p) {
  std::uint32_t v = 0;
  std::memcpy(&v, p, sizeof v);  // CRIU writes its images in the host's order: x86-64, little-endian
  return v;
}

}  // namespace

Fields Fields::parse(std::string_view b, const std::string& what) {
  Fields f;
  std::size_t pos = 0;
  while (pos < b.size()) {
    const std::size_t start = pos;
    std::uint64_t tag = 0;
    if (!varint(b, pos, tag)) throw Error(Code::InvalidArgument, at(what, start) + ": a truncated field tag");
    const auto field = static_cast<int>(tag >> 3);
    if (field <= 0 || (tag >> 3) > 536870911u)
      throw Error(Code::InvalidArgument, at(what, start) + ": field number 0 or out of range");
    std::uint64_t v = 0;
    switch (tag & 7u) {
      case 0:
        if (!varint(b, pos, v)) throw Error(Code::InvalidArgument, at(what, start) + ": a truncated number");
        f.numbers_.emplace(field, v);
        break;
      case 1:
      case 5: {
        const std::size_t n = (tag & 7u) == 1 ? 8 : 4;
        if (b.size() - pos < n) throw Error(Code::InvalidArgument, at(what, start) + ": a truncated fixed-width number");
        std::memcpy(&v, b.data() + pos, n);
        pos += n;
        f.numbers_.emplace(field, v);
        break;
      }
      case 2:
        if (!varint(b, pos, v) || v > b.size() - pos)
          throw Error(Code::InvalidArgument, at(what, start) + ": a length past the end of the message");
        f.bytes_.emplace(field, b.substr(pos, static_cast<std::size_t>(v)));
        pos += static_cast<std::size_t>(v);
        break;
      default: throw Error(Code::InvalidArgument, at(what, start) + ": wire type " + std::to_string(tag & 7u) + " is not CRIU's");
    }
  }
  return f;
}

bool Fields::has(int field) const {
  return numbers_.count(field) > 0 || bytes_.count(field) > 0;
}

std::uint64_t Fields::number(int field, std::uint64_t fallback) const {
  auto it = numbers_.find(field);
  return it == numbers_.end() ? fallback : it->second;
}

std::string_view Fields::bytes(int field) const {
  auto it = bytes_.find(field);
  return it == bytes_.end() ? std::string_view() : it->second;
}

std::vector<std::uint64_t> Fields::numbers(int field) const {
  std::vector<std::uint64_t> out;
  auto [lo, hi] = numbers_.equal_range(field);
  for (auto it = lo; it != hi; ++it) out.push_back(it->second);
  return out;
}

std::vector<std::string> read_entries(const std::filesystem::path& file, std::uint32_t magic, bool optional) {
  std::error_code ec;
  const auto st = std::filesystem::symlink_status(file, ec);
  if (ec || !std::filesystem::exists(st)) {
    if (optional) return {};
    throw Error(Code::NotFound, file.string() + ": not in the image");
  }
  // A link in an image could point anywhere on the host: not followed. read_file refuses what is
  // not a regular file and what passes the bound.
  if (std::filesystem::is_symlink(st)) throw Error(Code::InvalidArgument, file.string() + ": a symbolic link");
  const std::string data = read_file(file, kMaxImageFileBytes);
  if (data.size() < 8 || (le32(data.data()) != kCommonMagic && le32(data.data()) != kServiceMagic) ||
      le32(data.data() + 4) != magic)
    throw Error(Code::InvalidArgument, file.string() + ": not the CRIU image its name says (magic)");
  std::vector<std::string> entries;
  std::size_t pos = 8;
  while (pos < data.size()) {
    if (data.size() - pos < 4) throw Error(Code::InvalidArgument, at(file.string(), pos) + ": a truncated entry size");
    const std::uint32_t n = le32(data.data() + pos);
    pos += 4;
    if (n > kMaxEntryBytes || n > data.size() - pos)
      throw Error(Code::InvalidArgument,
                  at(file.string(), pos - 4) + ": an entry of " + std::to_string(n) + " bytes past the end");
    entries.emplace_back(data.substr(pos, n));
    pos += n;
  }
  return entries;
}

}  // namespace nvproxy::checkpoint::criu
