#include "common/version.h"

#include <cctype>

namespace nvproxy {

std::string Version::text() const {
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

std::optional<Version> parse_version(const std::string& s) {
  for (size_t i = 0; i < s.size(); ++i) {
    // A number starts after neither a letter, a digit nor a dot ("v1.4.3" is a commit name).
    if (!std::isdigit(static_cast<unsigned char>(s[i])) ||
        (i > 0 && (std::isalnum(static_cast<unsigned char>(s[i - 1])) || s[i - 1] == '.')))
      continue;
    int parts[3] = {0, 0, 0};
    size_t j = i;
    int n = 0;
    while (n < 3) {
      size_t k = j;
      long v = 0;
      while (k < s.size() && std::isdigit(static_cast<unsigned char>(s[k])) && v < 1000000) v = v * 10 + (s[k++] - '0');
      if (k == j) break;
      parts[n++] = static_cast<int>(v);
      j = k;
      if (j + 1 < s.size() && s[j] == '.' && std::isdigit(static_cast<unsigned char>(s[j + 1])))
        ++j;
      else
        break;
    }
    if (n >= 2) return Version{parts[0], parts[1], parts[2]};
  }
  return std::nullopt;
}

}  // namespace nvproxy
