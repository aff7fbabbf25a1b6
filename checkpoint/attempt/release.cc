#include "checkpoint/attempt/release.h"

#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>

#include "checkpoint/config.h"
#include "checkpoint/programs/shim_files.h"

namespace nvproxy::checkpoint {

namespace fs = std::filesystem;

std::string ReleasePlan::devices_text() const {
  std::string s;
  for (std::uint64_t d : devices)
    s += (s.empty() ? "" : ",") + std::to_string(major(static_cast<dev_t>(d))) + ":" +
         std::to_string(minor(static_cast<dev_t>(d)));
  return s;
}

std::string default_criu_plugin_dir() {
  std::string p = find_beside_shim(std::string("criu-plugins/") + kReleasePluginFile, R_OK);
  return p.empty() ? "" : fs::path(p).parent_path().string();
}

std::string criu_plugin_dir(const CheckpointConfig& cfg) {
  return cfg.criu_plugin_dir.empty() ? default_criu_plugin_dir() : cfg.criu_plugin_dir;
}

std::string release_plugin_problem(const std::string& dir) {
  if (dir.empty())
    return std::string("the shim's CRIU plugin (") + kReleasePluginFile +
           ") is not installed beside it (checkpoint.criu_plugin_dir)";
  if (::access((fs::path(dir) / kReleasePluginFile).c_str(), R_OK) != 0)
    return std::string("the shim's CRIU plugin is not in ") + dir + " (checkpoint.criu_plugin_dir)";
  return "";
}

}  // namespace nvproxy::checkpoint
