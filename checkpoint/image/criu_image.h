// Reading CRIU's own image files (IMAGE/files.img, pstree.img, core-PID.img, ...) without CRIU:
// each is a magic header followed by length-prefixed protobuf messages, read here field by field
// (the wire format only; CRIU's .proto field numbers are named where they are used). The image may
// come from another node or a registry: every length is bounded and a truncated or hostile file is
// an Error naming the file and the offset, never a crash or an unbounded allocation.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace nvproxy::checkpoint::criu {

// The image files this reader knows, by the magic CRIU writes after its common one.
inline constexpr std::uint32_t kPstreeMagic = 0x50273030;
inline constexpr std::uint32_t kCoreMagic = 0x55053847;
inline constexpr std::uint32_t kIdsMagic = 0x54432030;
inline constexpr std::uint32_t kFdinfoMagic = 0x56213732;
inline constexpr std::uint32_t kFilesMagic = 0x56303138;
inline constexpr std::uint32_t kRemapFpathMagic = 0x59133954;
inline constexpr std::uint32_t kStatsMagic = 0x57093306;  // stats-dump, stats-restore: service files

// Bounds for an image file read whole (files.img of a server with thousands of fds is a few MiB).
inline constexpr std::uintmax_t kMaxImageFileBytes = std::uintmax_t{64} << 20;

// One protobuf message's fields: varints (and fixed-width numbers) and length-delimited bytes, by
// field number, in the order met (repeated fields keep every value).
class Fields {
 public:
  // Throws Error(InvalidArgument) with `what` (file and offset) on malformed bytes.
  static Fields parse(std::string_view bytes, const std::string& what);

  [[nodiscard]] bool has(int field) const;
  // The first value of a number field; `fallback` when absent.
  [[nodiscard]] std::uint64_t number(int field, std::uint64_t fallback = 0) const;
  // The first value of a bytes/string/message field; empty when absent.
  [[nodiscard]] std::string_view bytes(int field) const;
  [[nodiscard]] std::vector<std::uint64_t> numbers(int field) const;

 private:
  std::multimap<int, std::uint64_t> numbers_;
  std::multimap<int, std::string_view> bytes_;
};

// The messages of one image file, checked against its magic. A missing file: an empty list when
// `optional`, else Error(NotFound). The strings own the bytes that Fields::parse views.
std::vector<std::string> read_entries(const std::filesystem::path& file, std::uint32_t magic, bool optional = false);

}  // namespace nvproxy::checkpoint::criu
