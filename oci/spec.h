// The OCI runtime spec of a bundle (config.json). The full JSON is kept so that fields we do not
// model survive a load/edit/save round trip; accessors cover what the shim reads.
#pragma once

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace nvproxy::oci {

class Spec {
 public:
  // Parses and validates; `origin` (a file name) prefixes every error.
  static Spec parse(std::string_view text, const std::string& origin);
  static Spec load(const std::filesystem::path& bundle);  // bundle/config.json
  void save(const std::filesystem::path& bundle) const;   // atomic write of bundle/config.json

  nlohmann::json& json() { return j_; }
  [[nodiscard]] const nlohmann::json& json() const { return j_; }

  [[nodiscard]] std::string root_path() const;
  [[nodiscard]] bool terminal() const;
  [[nodiscard]] std::map<std::string, std::string> annotations() const;
  [[nodiscard]] std::optional<std::string> annotation(const std::string& key) const;
  [[nodiscard]] std::optional<std::string> env(const std::string& key) const;
  // True when the container gets its own pid namespace (no "path" to join): then killing init
  // kills everything, otherwise the shim must kill all processes itself.
  [[nodiscard]] bool own_pid_namespace() const;
  [[nodiscard]] std::string cgroups_path() const;

 private:
  explicit Spec(nlohmann::json j) : j_(std::move(j)) {}
  nlohmann::json j_;
};

// Checks the structure the runtime and the shim rely on. Throws Error(InvalidArgument) naming the
// origin and the field, e.g. "config.json: process.args: must be a non-empty array of strings".
void validate_spec(const nlohmann::json& j, const std::string& origin);
// Same for a process spec given to Exec.
void validate_process(const nlohmann::json& p, const std::string& origin, const std::string& field = "process");

}  // namespace nvproxy::oci
