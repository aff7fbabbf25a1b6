#include "common/text.h"

#include <cctype>

#include "common/error.h"

namespace nvproxy {

std::string trim(std::string_view s) {
  auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  return std::string(s);
}

namespace {

// The length of the well-formed UTF-8 sequence at s[i], or 0 when the byte there starts none.
std::size_t utf8_sequence(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte (RFC 3629's table)
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;  // no surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k)
    if (b(i + k) < 0x80 || b(i + k) > 0xBF) return 0;
  return n;
}

void append_escaped(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_sequence(s, i);
    if (n == 0) {
      const auto c = static_cast<unsigned char>(s[i]);
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
      ++i;
    } else {
      out.append(s.data() + i, n);
      i += n;
    }
  }
}

}  // namespace

bool is_valid_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_sequence(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string valid_utf8(std::string_view s) {
  if (is_valid_utf8(s)) return std::string(s);
  std::string out;
  out.reserve(s.size() + 16);
  append_escaped(out, s);
  return out;
}

std::string quote_value(std::string_view value, std::size_t prefix) {
  std::string out = "\"";
  if (value.size() <= prefix) {
    append_escaped(out, value);
    return out + "\"";
  }
  std::size_t cut = prefix;  // back off over continuation bytes (3 at most) so that no sequence is split
  for (int k = 0; k < 3 && cut > 0 && (static_cast<unsigned char>(value[cut]) & 0xC0) == 0x80; ++k) --cut;
  append_escaped(out, value.substr(0, cut));
  return out + "...\" (" + std::to_string(value.size()) + " bytes)";
}

void check_bound(std::string_view field, std::size_t size, std::size_t bound, std::string_view unit) {
  if (size <= bound) return;
  throw Error(Code::InvalidArgument, std::string(field) + ": " + std::to_string(size) + " " + std::string(unit) +
                                         " exceeds the bound of " + std::to_string(bound));
}

}  // namespace nvproxy
