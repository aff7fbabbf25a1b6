// The flags of the node commands (configure, doctor): --name VALUE, --name=VALUE, --switch.
#pragma once

#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

namespace nvproxy::node {

struct Flags {
  std::map<std::string, std::string> values;  // "--config" -> "FILE"
  std::set<std::string> switches;             // "--dry-run"
  [[nodiscard]] bool on(const std::string& s) const { return switches.count(s) != 0; }
  [[nodiscard]] std::string value(const std::string& name, const std::string& fallback = "") const {
    auto it = values.find(name);
    return it == values.end() ? fallback : it->second;
  }
};

// Throws Error(InvalidArgument) naming an unknown flag, a switch given a value or a missing value.
Flags parse_flags(const std::vector<std::string>& args, const std::set<std::string>& with_value,
                  const std::set<std::string>& switches);

// A node command's flags (--help and -h added to SWITCHES), or its exit code when it is done
// already: 2 once a bad flag is named on ERR with the usage, 0 once --help printed it on OUT.
struct CommandFlags {
  Flags flags;
  std::optional<int> done;
};
CommandFlags parse_command(const std::string& command, const std::vector<std::string>& args,
                           const std::set<std::string>& with_value, std::set<std::string> switches, const std::string& usage,
                           std::ostream& out, std::ostream& err);

}  // namespace nvproxy::node
