// Validation of names that end up in paths and command lines.
#pragma once

#include <string_view>

namespace nvproxy {

// Container, exec and namespace ids: 1..76 chars of [A-Za-z0-9_.-], not starting with '.' or '-'
// (containerd's own identifier rule, bounded). Throws Error(InvalidArgument) naming `what`.
void validate_id(std::string_view what, std::string_view id);

}  // namespace nvproxy
