// What a runtime binary (runc, crun, runsc) and a CRIU binary say about themselves: their
// `--version` (and runc's `features`) outputs, parsed. The shim speaks each version's dialect from
// this: runc before 1.2 names CRIU with its global --criu flag; runc 1.2 ignores that flag (with a
// warning, its changelog says) and 1.4.3 rejects it ("flag provided but not defined: -criu"), so
// from 1.2 on CRIU is found through PATH.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

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
// Why the runtime at `binary` cannot checkpoint at all, as it says itself (crun built without CRIU,
// as Debian 12's is; a runc whose features say checkpoint is not enabled); empty when it can or
// does not say.
std::string checkpoint_unsupported(const RuntimeFeatures& f, const std::string& binary);

struct CriuInfo {
  std::string binary;              // the program that would run (criu_path, or "criu" found in PATH)
  std::string version;             // "4.2.1"; empty: unknown
  std::optional<Version> numbers;  // of version
  std::string error;               // why unknown
  // It takes --skip-zero-pages: the CRIU that scripts/build-criu.sh builds, with the project's
  // patch (scripts/criu-skip-zero-pages.patch), leaves zero pages of private memory out of the image.
  bool skip_zero_pages = false;
  // It takes --page-writers and --restore-huge-pages (scripts/criu-page-io.patch): each process's
  // pages written by a writer process while the next is dumped, huge pages asked for in the
  // memory a restore fills.
  bool page_io = false;
  // It takes --page-readers as well (the patch as it is now): a restored process's pages read in
  // by several threads at once.
  bool page_readers = false;
  // It takes --resumed-fifo: a leave-running dump runs the processes again once the page writers
  // hold their pages, before they are written, and tells a FIFO (oci/criu_resumed_watch.h).
  bool resumed_fifo = false;
  // It takes --write-gate: the held pages are written only once the caller opens a second FIFO
  // (its own resume of CUDA done), so that the writes do not slow the driver's copy back.
  bool write_gate = false;
};
// From `criu --version` ("Version: 4.2.1\nGitID: ...").
CriuInfo parse_criu_version(const std::string& out);
// Whether `criu --help` lists OPTION ("--skip-zero-pages") as an option of its own.
bool criu_help_lists_option(const std::string& help, std::string_view option);
inline bool criu_help_lists_skip_zero_pages(const std::string& help) {
  return criu_help_lists_option(help, "--skip-zero-pages");
}
// The zero pages CRIU left out of an image, summed from its dump log's "Zero pages left out: N (K
// KiB)" lines (one per process); nullopt when the log has none (an unpatched CRIU, or no log).
std::optional<std::uint64_t> criu_zero_pages_left_out(const std::filesystem::path& dump_log);

}  // namespace nvproxy::oci
