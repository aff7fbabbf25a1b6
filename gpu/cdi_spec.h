// One CDI spec file (https://github.com/cncf-tags/container-device-interface/blob/main/SPEC.md):
// load with yaml-cpp (JSON is YAML), validate, and turn into ContainerEdits. Errors name the file
// and the field ("FILE: devices[2].containerEdits.mounts[0].containerPath: ...").
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpu/container_edits.h"

namespace nvproxy::gpu {

struct CdiDevice {
  std::string name;
  std::string field;  // "devices[3]", for messages
  ContainerEdits edits;
};

struct CdiSpec {
  std::string file;
  std::string version;
  std::string kind;      // "vendor.com/class"
  ContainerEdits edits;  // top-level containerEdits: applied once when any device of the spec is used
  std::vector<CdiDevice> devices;
  [[nodiscard]] const CdiDevice* find(const std::string& name) const;
};

// Reads and validates FILE. Throws Error(InvalidArgument) ("CDI spec FILE: FIELD: why") or NotFound.
CdiSpec load_cdi_spec(const std::filesystem::path& file);
// Same, from text already read; `file` only names it in messages.
CdiSpec parse_cdi_spec(const std::string& text, const std::string& file);

// YAML document -> JSON with YAML 1.1 scalars typed (ints incl. 0o/0x/leading-0 octal, bools, null).
nlohmann::json yaml_to_json(const std::string& text);

struct QualifiedName {
  std::string kind;  // vendor.com/class
  std::string name;  // device name or "all"
};
// "vendor.com/class=name" -> parts, or nullopt when it is not a valid fully-qualified CDI name.
std::optional<QualifiedName> parse_qualified_name(const std::string& s);
bool valid_kind(const std::string& kind);
bool valid_device_name(const std::string& name);
bool known_cdi_version(const std::string& v);

}  // namespace nvproxy::gpu
