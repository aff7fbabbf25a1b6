// The one way product code reads a number from text (a /proc file, an env value, a device index,
// a JSON key): std::from_chars, all of the text, in range, or nothing. No exception from the
// standard library (std::stoul's out_of_range, invalid_argument) can escape from here.
#pragma once

#include <charconv>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>

#include "common/error.h"
#include "common/text.h"

namespace nvproxy {

// `text` as a T in `base` when all of it is one (no sign for unsigned types, no spaces, no "0x"),
// nullopt otherwise (empty, other characters, out of T's range).
template <class T>
std::optional<T> parse_number(std::string_view text, int base = 10) {
  static_assert(std::is_integral_v<T>);
  T v{};
  if (text.empty()) return std::nullopt;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v, base);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

// The number that `text` starts with ("3-abc" is 3), nullopt when it starts with none or the
// digits are out of T's range.
template <class T>
std::optional<T> parse_leading_number(std::string_view text, int base = 10) {
  static_assert(std::is_integral_v<T>);
  T v{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v, base);
  if (ec != std::errc() || end == text.data()) return std::nullopt;
  return v;
}

// The same, or Error(InvalidArgument) "<what>: <quoted text> is not a number" or "... is out of range".
template <class T>
T parse_number_or_throw(std::string_view text, std::string_view what, int base = 10) {
  if (auto v = parse_number<T>(text, base)) return *v;
  T v{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v, base);
  const bool range = ec == std::errc::result_out_of_range && end == text.data() + text.size();
  throw Error(Code::InvalidArgument,
              std::string(what) + ": " + quote_value(text) + (range ? " is out of range" : " is not a number"));
}

}  // namespace nvproxy
