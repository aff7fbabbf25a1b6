// Integers read from JSON that came from elsewhere (an image's record, a facts file): nlohmann's get<int>
// converts a float or an out-of-range number silently (a float out of range is undefined behaviour),
// so every such field goes through here and a bad one is an Error naming the field.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "common/error.h"

namespace nvproxy {

template <class Int>
Int json_integer(const nlohmann::json& v, const std::string& what) {
  bool fits = false;
  if (v.is_number_unsigned())
    fits = std::in_range<Int>(v.get<std::uint64_t>());
  else if (v.is_number_integer())
    fits = std::in_range<Int>(v.get<std::int64_t>());
  else
    throw Error(Code::InvalidArgument, "\"" + what + "\" is not an integer: " + v.dump());
  if (!fits) throw Error(Code::InvalidArgument, "\"" + what + "\" is out of range: " + v.dump());
  return v.is_number_unsigned() ? static_cast<Int>(v.get<std::uint64_t>()) : static_cast<Int>(v.get<std::int64_t>());
}

// obj[key] when present, `fallback` when not.
template <class Int>
Int json_integer_or(const nlohmann::json& obj, const char* key, Int fallback) {
  auto it = obj.find(key);
  return it == obj.end() ? fallback : json_integer<Int>(*it, key);
}

}  // namespace nvproxy
