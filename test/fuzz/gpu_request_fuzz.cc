// What a pod author writes to ask for GPUs (issue 63): NVIDIA_VISIBLE_DEVICES and
// NVIDIA_DRIVER_CAPABILITIES values, CDI annotations and CDI names, through parse_request.
// Byte 0 picks the shape, the rest is the value:
//   0: NVIDIA_VISIBLE_DEVICES=<rest>        1: NVIDIA_DRIVER_CAPABILITIES=<rest> (and a GPU)
//   2: annotations, one "key=value" a line   3: one cdi.k8s.io annotation whose value is <rest>
// Invariants (a violation aborts):
//   - only nvproxy::Error comes out, InvalidArgument, with a message that is short (values quoted
//     are cut) and valid UTF-8 once escaped where a status is built;
//   - no device twice, every CDI name parses, and no list beyond RequestLimits;
//   - a 1 MB input of each shape is handled (refused) in well under a second.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/text.h"
#include "gpu/cdi_spec.h"
#include "gpu/device_request.h"

using namespace nvproxy;
using namespace nvproxy::gpu;
using nlohmann::json;

namespace {
void check(bool ok) {
  if (!ok) std::abort();
}

json spec_of(unsigned shape, std::string_view rest) {
  json spec = {{"ociVersion", "1.0.2"}, {"process", {{"env", json::array({"PATH=/bin"})}}}};
  auto& env = spec["process"]["env"];
  switch (shape % 4) {
    case 0: env.push_back("NVIDIA_VISIBLE_DEVICES=" + std::string(rest)); break;
    case 1:
      env.push_back("NVIDIA_VISIBLE_DEVICES=0");
      env.push_back("NVIDIA_DRIVER_CAPABILITIES=" + std::string(rest));
      break;
    case 2: {
      json ann = json::object();
      std::size_t start = 0;
      while (start <= rest.size()) {
        std::size_t end = rest.find('\n', start);
        if (end == std::string_view::npos) end = rest.size();
        std::string_view line = rest.substr(start, end - start);
        const std::size_t eq = line.find('=');
        if (eq != std::string_view::npos) ann[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
        start = end + 1;
      }
      spec["annotations"] = ann;
      break;
    }
    default: spec["annotations"] = {{"cdi.k8s.io/fuzz", std::string(rest)}}; break;
  }
  return spec;
}

void run(const json& spec) {
  GpuRequest r;
  try {
    r = parse_request(spec);
  } catch (const Error& e) {
    check(e.code() == Code::InvalidArgument);
    const std::string m = e.what();
    check(m.size() < 1024);
    check(is_valid_utf8(valid_utf8(m)));
    return;
  }
  const RequestLimits limits;
  check(r.visible.size() + r.cdi_names.size() <= limits.max_devices);
  std::set<std::string> seen(r.visible.begin(), r.visible.end());
  check(seen.size() == r.visible.size());
  seen.insert(r.cdi_names.begin(), r.cdi_names.end());
  check(seen.size() == r.visible.size() + r.cdi_names.size());
  for (const auto& n : r.cdi_names) check(parse_qualified_name(n).has_value());
  check(r.requested == (r.visible_all || !r.visible.empty() || !r.cdi_names.empty()));
}

// Once per process: a 1 MB input of each shape, each within a bound that a quadratic parser misses
// by far (the dedupe this replaced took 27 s for the first shape in a release build) and a sanitized
// build on a machine running the e2e tests beside it does not (the shim itself: well under a second,
// bench/README section 9).
void check_large_inputs() {
  std::string indices, caps, lines, names;
  for (int i = 0; indices.size() < 1000000; ++i) indices += std::to_string(i) + ",";
  while (caps.size() < 1000000) caps += "compute,utility,bogus,";
  for (int i = 0; lines.size() < 1000000; ++i)
    lines += "cdi.k8s.io/a" + std::to_string(i) + "=vendor.com/gpu=d" + std::to_string(i) + "\n";
  for (int i = 0; names.size() < 1000000; ++i) names += "vendor.com/gpu=d" + std::to_string(i) + ",";
  const std::string* inputs[] = {&indices, &caps, &lines, &names};
  for (unsigned shape = 0; shape < 4; ++shape) {
    const json spec = spec_of(shape, *inputs[shape]);
    const auto t0 = std::chrono::steady_clock::now();
    run(spec);
    check(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const bool large_checked = (check_large_inputs(), true);
  (void)large_checked;
  if (size < 1) return 0;
  run(spec_of(data[0], std::string_view(reinterpret_cast<const char*>(data + 1), size - 1)));
  return 0;
}
