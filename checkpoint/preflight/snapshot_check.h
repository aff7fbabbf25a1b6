// A reason the runtime's snapshot cannot work on this host, found before any CUDA process is
// toggled (a refused checkpoint costs nothing; a snapshot that fails after the toggles costs a
// rollback and, for a large container, minutes). The Orchestrator asks it with the container's pids.
#pragma once

#include <sys/types.h>

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace nvproxy::checkpoint {

struct SnapshotProblem {
  std::string reason;                  // one sentence, with the fix
  std::map<pid_t, std::string> hints;  // the processes concerned, one sentence each
  std::string key;                     // where the details go in checkpoint-diagnostic.json
  nlohmann::json details = nlohmann::json::object();
};

class SnapshotCheck {
 public:
  virtual ~SnapshotCheck() = default;
  virtual std::optional<SnapshotProblem> check(const std::vector<pid_t>& pids) = 0;
};

}  // namespace nvproxy::checkpoint
