#include "common/text.h"

#include <cctype>

namespace nvproxy {

std::string trim(std::string_view s) {
  auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  return std::string(s);
}

}  // namespace nvproxy
