// The CDI loader: parse_cdi_spec on YAML (yaml-cpp + YAML 1.1 scalars) or JSON (byte 0 picks the
// file name, as the loader picks by extension), then what the device layer does with a valid spec.
// Invariants (a violation aborts):
//   - every device of a valid spec has a fully-qualified name "KIND=NAME" that parses back;
//   - container paths of nodes, mounts and hooks are absolute;
//   - merging a spec's edits twice is idempotent (CRI applies CDI edits before the shim sees them).
// Only nvproxy::Error may come out (conventions.md).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/error.h"
#include "gpu/cdi_spec.h"
#include "gpu/container_edits.h"

using namespace nvproxy;
using namespace nvproxy::gpu;

namespace {
void check(bool ok) {
  if (!ok) std::abort();
}
std::size_t count(const ContainerEdits& e) {
  return e.env.size() + e.device_nodes.size() + e.mounts.size() + e.hooks.size() + e.additional_gids.size() + e.symlinks.size();
}
void check_paths(const ContainerEdits& e) {
  for (const auto& n : e.device_nodes) check(!n.path.empty() && n.path[0] == '/');
  for (const auto& m : e.mounts) check(!m.container_path.empty() && m.container_path[0] == '/');
  for (const auto& h : e.hooks) check(!h.path.empty() && h.path[0] == '/');
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const char* name = (data[0] & 1) ? "/etc/cdi/fuzz.json" : "/etc/cdi/fuzz.yaml";
  std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  CdiSpec s;
  try {
    s = parse_cdi_spec(text, name);
  } catch (const Error&) {
    return 0;
  }
  check(!s.devices.empty());
  check(valid_kind(s.kind) && known_cdi_version(s.version));
  check_paths(s.edits);
  for (const auto& d : s.devices) {
    auto q = parse_qualified_name(s.kind + "=" + d.name);
    check(q && q->kind == s.kind && q->name == d.name);
    check(s.find(d.name) == &d);
    check_paths(d.edits);
  }
  // What a request for every device does: spec-wide edits once, then each device's.
  ContainerEdits all;
  try {
    merge_edits(all, s.edits);
    for (const auto& d : s.devices) merge_edits(all, d.edits);
  } catch (const Error&) {
    return 0;  // two devices of one spec that disagree: refused, fine
  }
  std::size_t n = count(all);
  ContainerEdits again = all;
  merge_edits(again, all);  // the same edits again: exact repeats are dropped, nothing conflicts
  check(count(again) == n);
  return 0;
}
