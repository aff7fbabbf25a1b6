// Small text helpers for what tools and the kernel print (a version line, /proc files).
#pragma once

#include <string>
#include <string_view>

namespace nvproxy {

// `s` without the whitespace at either end.
std::string trim(std::string_view s);

}  // namespace nvproxy
