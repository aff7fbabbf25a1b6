#include "shim/node/cli_args.h"

#include "common/error.h"

namespace nvproxy::node {

Flags parse_flags(const std::vector<std::string>& args, const std::set<std::string>& with_value,
                  const std::set<std::string>& switches) {
  Flags f;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string name = args[i];
    std::optional<std::string> inline_value;
    if (auto eq = name.find('='); name.rfind("--", 0) == 0 && eq != std::string::npos) {
      inline_value = name.substr(eq + 1);
      name.resize(eq);
    }
    if (with_value.count(name)) {
      if (inline_value) {
        f.values[name] = *inline_value;
      } else if (i + 1 < args.size()) {
        f.values[name] = args[++i];
      } else {
        throw Error(Code::InvalidArgument, name + " needs a value");
      }
    } else if (switches.count(name)) {
      if (inline_value) throw Error(Code::InvalidArgument, name + " takes no value");
      f.switches.insert(name);
    } else {
      throw Error(Code::InvalidArgument, "unknown argument \"" + args[i] + "\" (see --help)");
    }
  }
  return f;
}

}  // namespace nvproxy::node
