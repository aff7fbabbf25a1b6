// What a runtime binary (runc, crun, runsc) and a CRIU binary say about themselves: their
// `--version` (and runc's `features`) outputs, parsed. The shim speaks each version's dialect from
// this: runc before 1.2 names CRIU with its global --criu flag; runc 1.2 ignores that flag (with a
// warning, its changelog says) and 1.4.3 rejects it ("flag provided but not defined: -criu"), so
// from 1.2 on CRIU is found through PATH.
#pragma once

#include <optional>
#include <string>

#include "common/version.h"
#include "oci/runtime_flavor.h"

namespace nvproxy::oci {

using nvproxy::parse_version;
using nvproxy::Version;

struct RuntimeFeatures {
  RuntimeKind kind = RuntimeKind::Runc;
  std::string version;             // as the binary prints it ("1.1.5+ds1", "release-20260817.0-70-g3c5eee17d"); empty: unknown
  std::optional<Version> numbers;  // runc, crun: the version's numbers; runsc: none (dated releases)
  // runc < 1.2: the global --criu flag names the CRIU binary. Otherwise CRIU is looked up in PATH.
  bool criu_flag = false;
  // runc's `checkpoint --link-remap` (runc 1.4 has it, 1.1 not). Where runc has the flag it also sets
  // CRIU's link_remap in its RPC request, which overrides a "link-remap" line of the CRIU
  // configuration the shim hands over: such a runc must be given the flag itself.
  bool link_remap_flag = false;
  // runc features' org.opencontainers.runc.checkpoint.enabled, crun's +CRIU; nullopt: not told.
  std::optional<bool> checkpoint;
  std::string error;  // why the version is unknown (the probe failed), else empty
};

// From the outputs of `BINARY --version` and (runc only; empty otherwise) `runc features` and
// `runc checkpoint --help`.
RuntimeFeatures parse_runtime_features(RuntimeKind kind, const std::string& version_out, const std::string& features_out,
                                       const std::string& checkpoint_help = "");

struct CriuInfo {
  std::string binary;              // the program that would run (criu_path, or "criu" found in PATH)
  std::string version;             // "4.2.1"; empty: unknown
  std::optional<Version> numbers;  // of version
  std::string error;               // why unknown
};
// From `criu --version` ("Version: 4.2.1\nGitID: ...").
CriuInfo parse_criu_version(const std::string& out);

}  // namespace nvproxy::oci
