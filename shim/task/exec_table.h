// The execs of one container by exec id. Every member is called with the container's mu held
// (container.h): the table, the execs' states and the exit ordering change together.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <map>
#include <memory>
#include <string>

namespace nvproxy::shim {

class ExecProcess;

class ExecTable {
 public:
  explicit ExecTable(std::string container_id) : container_id_(std::move(container_id)) {}

  // NotFound for an unknown exec id.
  [[nodiscard]] std::shared_ptr<ExecProcess> find_locked(const std::string& exec_id) const;
  // AlreadyExists for an exec id in use.
  void add_locked(const std::shared_ptr<ExecProcess>& p);
  void erase_locked(const std::string& exec_id);
  // exec id -> pid of execs that have one.
  [[nodiscard]] std::map<std::string, pid_t> pids_locked() const;
  // The execs that run and have not exited: the init's exit waits for theirs.
  [[nodiscard]] size_t running_locked() const;

 private:
  const std::string container_id_;
  std::map<std::string, std::shared_ptr<ExecProcess>> execs_;
};

}  // namespace nvproxy::shim
