// Docker's daemon.json with this runtime added (nlohmann::ordered_json: the other keys kept, in
// their order): runtimes.NAME, and runtimes.NAME-exit for Docker's stopping checkpoint (Docker 26
// sends no checkpoint options to a runtimeType other than runc's, so that runtime's shim config
// sets checkpoint.exit_without_options; docs/install.md, Docker).
#pragma once

#include <string>
#include <vector>

namespace nvproxy::node {

struct DockerEntry {
  std::string name = "nvproxy";
  std::string shim_config;  // runtimes.NAME.options.ConfigPath; empty: not set (one there is kept)
  std::string exit_config = "/etc/containerd-shim-nvproxy/exit.yaml";  // NAME-exit's ConfigPath; empty: no NAME-exit
  bool set_as_default = false;                                         // default-runtime
  bool experimental = false;                                           // "experimental": true (docker checkpoint needs it)
};

struct JsonEdit {
  std::string before;  // the original in the form the result is written in (for a diff)
  std::string after;
  bool changed = false;
  std::vector<std::string> notes;
};

// `text`: the file ("" when absent). Throws Error(InvalidArgument) for text that is not a JSON
// object ("ORIGIN:LINE:COL: what") or a runtimes entry that is not an object.
JsonEdit edit_docker_config(const std::string& text, const std::string& origin, const DockerEntry& entry);

// The shim config of NAME-exit: `base` (the runtime's shim config, "" when none) with
// checkpoint.exit_without_options: true. Throws Error(InvalidArgument) naming `origin` for YAML
// that does not parse or whose `checkpoint` is not a map.
std::string exit_shim_config(const std::string& base, const std::string& origin);
// Whether a shim config's checkpoint.exit_without_options is true (false when it does not parse).
bool exits_without_options(const std::string& yaml_text);

}  // namespace nvproxy::node
