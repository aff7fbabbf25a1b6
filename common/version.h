// Dotted version numbers as programs print them (runc, crun, CRIU, the kernel's release), for the
// decisions that depend on a version: which runc flags exist, whether this CRIU works on this kernel.
#pragma once

#include <optional>
#include <string>

namespace nvproxy {

// A dotted version's numbers ("1.1.15+ds1" -> 1.1.15); missing parts are 0.
struct Version {
  int major = 0, minor = 0, patch = 0;
  auto operator<=>(const Version&) const = default;
  [[nodiscard]] std::string text() const;
};
// The first "N.N[.N]" in `s` ("runc version 1.1.5+ds1", "Version: 4.2.1", "6.18.44-fc-v1045").
std::optional<Version> parse_version(const std::string& s);

}  // namespace nvproxy
