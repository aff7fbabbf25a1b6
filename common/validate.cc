#include "common/validate.h"

#include <string>

#include "common/error.h"

namespace nvproxy {

void validate_id(std::string_view what, std::string_view id) {
  auto bad = [&](const std::string& why) {
    throw Error(Code::InvalidArgument, std::string(what) + " \"" + std::string(id.substr(0, 100)) + "\" is invalid: " + why);
  };
  if (id.empty()) bad("empty");
  if (id.size() > 76) bad("longer than 76 characters");
  if (id[0] == '.' || id[0] == '-') bad("must start with a letter, digit or '_'");
  for (char c : id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
    if (!ok) bad("only letters, digits, '_', '.' and '-' are allowed");
  }
}

}  // namespace nvproxy
