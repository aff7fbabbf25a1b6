#include "shim/task/sandbox_target.h"

#include <nlohmann/json.hpp>

#include "common/fs.h"
#include "gpu/record.h"

namespace nvproxy::shim {

checkpoint::SandboxTarget sandbox_target(const oci::RuntimeConfig& rc, const std::string& id,
                                         const std::filesystem::path& bundle) {
  checkpoint::SandboxTarget t;
  t.runsc.push_back(rc.binary);
  if (!rc.root.empty()) t.runsc.push_back("--root=" + rc.root);
  t.runsc.insert(t.runsc.end(), rc.extra_args.begin(), rc.extra_args.end());
  t.container_id = id;
  // Without the library dirs the agent's loader searches the image's cache and default dirs.
  try {
    auto spec = nlohmann::json::parse(read_file(bundle / "config.json"), nullptr, false);
    if (auto rec = spec.is_discarded() ? std::nullopt : gpu::read_record(spec))
      t.lib_dirs = rec->value("ldDirs", std::vector<std::string>{});
  } catch (const std::exception&) {
    // An unreadable spec is reported where it matters (Create); here the defaults do.
  }
  return t;
}

}  // namespace nvproxy::shim
