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

CommandFlags parse_command(const std::string& command, const std::vector<std::string>& args,
                           const std::set<std::string>& with_value, std::set<std::string> switches, const std::string& usage,
                           std::ostream& out, std::ostream& err) {
  switches.insert({"--help", "-h"});
  CommandFlags c;
  try {
    c.flags = parse_flags(args, with_value, switches);
  } catch (const Error& e) {
    err << command << ": " << e.what() << "\n" << usage;
    c.done = 2;
    return c;
  }
  if (c.flags.on("--help") || c.flags.on("-h")) {
    out << usage;
    c.done = 0;
  }
  return c;
}

}  // namespace nvproxy::node
