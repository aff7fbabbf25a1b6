#include "shim/task/runtime_locator.h"

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/fs.h"
#include "shim/task/config.h"

namespace nvproxy::shim {

void write_runtime_record(const std::filesystem::path& bundle, const oci::RuntimeConfig& rc) {
  nlohmann::json j{{"binary", rc.binary},
                   {"root", rc.root},
                   {"extra_args", rc.extra_args},
                   {"systemd_cgroup", rc.systemd_cgroup},
                   {"criu_path", rc.criu_path}};
  write_file_atomic(bundle / kRuntimeRecordFile, j.dump(), 0600);
}

std::optional<oci::RuntimeConfig> read_runtime_record(const std::filesystem::path& bundle) {
  try {
    auto j = nlohmann::json::parse(read_file(bundle / kRuntimeRecordFile));
    oci::RuntimeConfig rc;
    rc.binary = j.at("binary").get<std::string>();
    rc.root = j.at("root").get<std::string>();
    rc.extra_args = j.at("extra_args").get<std::vector<std::string>>();
    rc.systemd_cgroup = j.at("systemd_cgroup").get<bool>();
    rc.criu_path = j.value("criu_path", "");
    return rc;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

oci::RuntimeConfig runtime_for_namespace(oci::RuntimeConfig rc, const std::string& ns) {
  if (!rc.root.empty()) rc.root += "/" + ns;
  return rc;
}

oci::RuntimeConfig locate_runtime(const std::filesystem::path& bundle, const std::string& ns) {
  if (auto rec = read_runtime_record(bundle)) return *rec;
  return runtime_for_namespace(load_config("").runtime, ns);
}

std::filesystem::path default_bundle(const std::string& ns, const std::string& id) {
  return std::filesystem::path("/run/containerd/io.containerd.runtime.v2.task") / ns / id;
}

}  // namespace nvproxy::shim
