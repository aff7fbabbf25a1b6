// Small text helpers for what tools and the kernel print (a version line, /proc files), and for
// what the shim says back: every message that leaves it is valid UTF-8, and a value it quotes is
// cut to a prefix with its length.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace nvproxy {

// `s` without the whitespace at either end.
std::string trim(std::string_view s);

// Is `s` well-formed UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF)?
bool is_valid_utf8(std::string_view s);

// `s` with every byte that is not part of a well-formed UTF-8 sequence written as "\xNN"
// (a backslash itself stays as it is). Linear; `s` unchanged when it is valid.
std::string valid_utf8(std::string_view s);

// How many bytes of a quoted value a message keeps.
inline constexpr std::size_t kQuotedPrefix = 64;

// A value for a message: "\"<value>\"" when it has at most `prefix` bytes, otherwise
// "\"<first bytes>...\" (N bytes)"; the cut never splits a UTF-8 sequence, and bytes that are
// not UTF-8 are escaped as in valid_utf8.
std::string quote_value(std::string_view value, std::size_t prefix = kQuotedPrefix);

// Throws Error(InvalidArgument) "<field>: <size> <unit> exceeds the bound of <bound>" when size > bound.
void check_bound(std::string_view field, std::size_t size, std::size_t bound, std::string_view unit = "bytes");

}  // namespace nvproxy
