#include "checkpoint/diagnose/diagnose_image.h"

#include <nlohmann/json.hpp>

#include "checkpoint/image/host_files.h"
#include "checkpoint/image/image_record.h"

namespace nvproxy::checkpoint {

int diagnose_image(const std::filesystem::path& image, bool json, std::ostream& out, std::ostream& err) {
  try {
    auto rec = read_image_record(image);
    if (!rec) {
      err << "error: " << image.string() << " holds no record of this shim (" << ImageRecord::kFileName << ")\n";
      return 1;
    }
    bool refused = false;
    nlohmann::json files = nlohmann::json::array();
    std::string text;
    for (const auto& f : rec->host_files) {
      const HostFileCheck c = check_on_this_node({f});
      const std::string verdict = !c.refusals.empty() ? c.refusals.front() : !c.warnings.empty() ? c.warnings.front() : "";
      refused = refused || !c.refusals.empty();
      nlohmann::json j = to_json(f);
      j["here"] = !c.refusals.empty() ? "refused" : !c.warnings.empty() ? "warning" : "ok";
      if (!verdict.empty()) j["why"] = verdict;
      files.push_back(std::move(j));
      text +=
          "  " +
          (f.pid > 0 ? "pid " + std::to_string(f.pid) + " (" + f.comm + ") fd " + std::to_string(f.fd) + " " : std::string()) +
          f.path + " <- " + f.host_path + (f.writing ? " (written)" : "") + ": " +
          (verdict.empty() ? std::string("there") : verdict) + "\n";
    }
    if (json) {
      out << nlohmann::json{{"container", rec->container},
                            {"runtime", rec->runtime},
                            {"host_files_listed", rec->host_files_listed},
                            {"host_files", files},
                            {"stopped_ms", rec->stopped_ms},
                            {"would_refuse", refused}}
                 .dump(2)
          << "\n";
    } else {
      out << "image " << image.string() << " of container \"" << rec->container << "\""
          << (rec->runtime.empty() ? "" : " (" + rec->runtime + ")") << "\n";
      if (!rec->host_files_listed)
        out << "host files: not listed (an image of a shim before 0.9.0)\n";
      else if (rec->host_files.empty())
        out << "host files: none on the container's bind mounts\n";
      else
        out << "host files its restore opens again (" << rec->host_files.size() << "), as the checkpoint saw them:\n" << text;
      if (!rec->checkpoint_phases.empty()) {
        out << "where the checkpoint's time went:";
        for (const auto& [name, ms] : rec->checkpoint_phases) out << " " << name << "=" << static_cast<long long>(ms) << "ms";
        out << "\n";
      }
      if (rec->stopped_ms > 0) out << "the workload was stopped " << static_cast<long long>(rec->stopped_ms) << " ms\n";
    }
    return refused ? 3 : 0;
  } catch (const std::exception& e) {
    err << "error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace nvproxy::checkpoint
