// The image's record (IMAGE/nvproxy-cuda.json), which `image pack` carries between hosts and every
// restore reads before it decides what to bring back: JSON parse, then image_record_from_json.
// Invariants (a violation aborts):
//   - only nvproxy::Error comes out of a malformed record (conventions.md);
//   - what was read writes back and reads again to the same JSON (nothing a restore relies on is
//     lost or changed in a round trip);
//   - the CUDA processes the restore expects are the ones written back.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "checkpoint/image/image_record.h"
#include "common/error.h"

using namespace nvproxy;
using namespace nvproxy::checkpoint;

namespace {
void check(bool ok) {
  if (!ok) std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto j = nlohmann::json::parse(data, data + size, nullptr, false);
  if (j.is_discarded()) return 0;
  ImageRecord r;
  try {
    r = image_record_from_json(j);
  } catch (const Error&) {
    return 0;
  }
  check(r.cuda_processes >= 0 && r.version <= ImageRecord::kVersion);
  const nlohmann::json once = to_json(r);
  ImageRecord again;
  try {
    again = image_record_from_json(once);
  } catch (const Error&) {
    std::abort();  // what this shim writes, it must read
  }
  check(to_json(again) == once);
  check(again.has_cuda() == r.has_cuda() && again.cuda_pids.size() == r.cuda_pids.size());
  for (std::size_t i = 0; i < r.cuda_pids.size(); ++i) check(again.cuda_pids[i].pid == r.cuda_pids[i].pid);
  check(again.released.size() == r.released.size());
  return 0;
}
