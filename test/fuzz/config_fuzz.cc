// The shim's config loader (issue 63): what an operator writes in config.yaml, through parse_config
// (yaml-cpp, then every section's keys and values).
// Invariants (a violation aborts):
//   - only nvproxy::Error comes out, with a message that is valid UTF-8 once escaped where a status
//     is built and that quotes no key at length;
//   - what loads has a runtime binary (the loader's own rule);
//   - a 1 MB config of each shape (a long list, many unknown keys, one long scalar, a deep
//     nesting, bytes that are not UTF-8) is handled in well under a second.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/error.h"
#include "common/text.h"
#include "shim/task/config.h"

using namespace nvproxy;

namespace {
void check(bool ok) {
  if (!ok) std::abort();
}

void run(const std::string& text) {
  try {
    const shim::ShimConfig c = shim::parse_config(text, "/etc/containerd-shim-nvproxy/config.yaml");
    check(!c.runtime.binary.empty());
  } catch (const Error& e) {
    const std::string m = e.what();
    check(is_valid_utf8(valid_utf8(m)));
    check(m.size() < 64 * 1024);
  }
}

void check_large_inputs() {
  const std::size_t mb = 1000000;
  std::string list = "runtime:\n  extra_args: [", keys = "runtime:\n", scalar = "runtime:\n  binary: ", deep,
              latin1 = "runtime:\n";
  while (list.size() < mb) list += "--debug, ";
  list += "x]\n";
  for (int i = 0; keys.size() < mb; ++i) keys += "  k" + std::to_string(i) + ": v\n";
  scalar += std::string(mb, 'r') + "\n";
  while (deep.size() < mb / 2) deep += "[";
  for (int i = 0; latin1.size() < mb; ++i) latin1 += "  bin\xe9ry" + std::to_string(i) + ": runc\n";
  for (const std::string* t : {&list, &keys, &scalar, &deep, &latin1}) {
    const auto t0 = std::chrono::steady_clock::now();
    run(*t);
    // Within a bound a super-linear loader misses by far and a sanitized build under load does not.
    check(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const bool large_checked = (check_large_inputs(), true);
  (void)large_checked;
  run(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
