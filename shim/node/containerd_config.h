// containerd's config.toml with this runtime added, edited as TOML (toml++), never as text: the
// CRI runtime entry in the form the file's version reads (version 2: containerd 1.6 and 1.7, also
// read by 2.x; version 3 and 4: containerd 2.x), every other setting kept. What the edit writes is
// the whole file in one normal form; comments of the original are not carried over.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/version.h"

namespace nvproxy::node {

inline constexpr const char* kRuntimeType = "io.containerd.nvproxy.v1";
inline constexpr const char* kCdiAnnotations = "cdi.k8s.io/*";

struct RuntimeEntry {
  std::string name = "nvproxy";  // the CRI handler: containerd.runtimes.<name>
  std::string shim_config;       // options.ConfigPath; empty: not set (one already there is kept)
  bool set_as_default = false;   // containerd.default_runtime_name = name
};

struct TomlEdit {
  std::string before;  // the original in the normal form the result is written in (for a diff)
  std::string after;   // the file to write
  bool changed = false;
  long version = 0;                // the config's version
  std::vector<std::string> notes;  // what the operator should know (a runc entry added, CRI disabled)
};

// `text`: the file (empty when there is none); `origin` names it in errors. `containerd_major`: 1
// or 2 (0: unknown, then the file's version decides and an empty file is refused). Throws
// Error(InvalidArgument) for a file that is not TOML ("ORIGIN:LINE:COL: what"), a version 1 file,
// a version 3 file for containerd 1.x, or a key of the runtime's path that is not a table.
TomlEdit edit_containerd_config(const std::string& text, const std::string& origin, int containerd_major,
                                const RuntimeEntry& entry);

struct DropInEdit {
  TomlEdit main;               // the main file: changed only where its `imports` lacked a directory
  std::filesystem::path path;  // the drop-in file under the imports' directory
  TomlEdit dropin;
};

// containerd 2.x only (1.x's imports replace whole plugin sections): the runtime goes into
// IMPORT_DIR/<name>.toml, where IMPORT_DIR is the directory of the main file's first "DIR/*.toml"
// import (relative ones against the main file's directory); without one, "<main dir>/conf.d/*.toml"
// is added to the main file. `read` gives a file's text (nullopt: absent). Throws as above.
using ReadText = std::function<std::optional<std::string>(const std::filesystem::path&)>;
DropInEdit edit_containerd_dropin(const std::string& main_text, const std::filesystem::path& main_path, int containerd_major,
                                  const RuntimeEntry& entry, const ReadText& read);

// The version in `containerd --version` output; its major version ("containerd github.com/containerd/containerd
// v2.3.4 ...", Debian's "... 1.6.20~ds1 ..."); 0 when it has none.
std::optional<Version> containerd_version(const std::string& version_output);
int containerd_major(const std::string& version_output);

}  // namespace nvproxy::node
