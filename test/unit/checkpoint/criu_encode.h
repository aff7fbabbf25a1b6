// CRIU's image format written by hand for tests and fuzz harnesses: the protobuf wire format's
// varints and length-delimited fields, and an image file's magic pair with its length-prefixed
// entries (checkpoint/image/criu_image.h reads them).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nvproxy::checkpoint::criu_encode {

inline std::string varint(std::uint64_t v) {
  std::string out;
  do {
    auto b = static_cast<char>(v & 0x7f);
    v >>= 7;
    if (v) b = static_cast<char>(b | 0x80);
    out.push_back(b);
  } while (v);
  return out;
}
inline std::string num(int field, std::uint64_t v) {
  return varint(static_cast<std::uint64_t>(field) << 3) + varint(v);
}
inline std::string bytes(int field, const std::string& b) {
  return varint((static_cast<std::uint64_t>(field) << 3) | 2) + varint(b.size()) + b;
}
inline std::string le32(std::uint32_t v) {
  return {reinterpret_cast<const char*>(&v), 4};
}
inline constexpr std::uint32_t kCommonMagic = 0x54564319, kServiceMagic = 0x55105940;
// An image file: the common (or service) magic, the file's own, then each entry's size and bytes.
inline std::string image(std::uint32_t magic, const std::vector<std::string>& entries, std::uint32_t first = kCommonMagic) {
  std::string data = le32(first) + le32(magic);
  for (const auto& e : entries) data += le32(static_cast<std::uint32_t>(e.size())) + e;
  return data;
}

}  // namespace nvproxy::checkpoint::criu_encode
