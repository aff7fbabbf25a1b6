#include "shim/task/exec_table.h"

#include "common/error.h"
#include "shim/task/exec_process.h"

namespace nvproxy::shim {

std::shared_ptr<ExecProcess> ExecTable::find_locked(const std::string& exec_id) const {
  auto it = execs_.find(exec_id);
  if (it == execs_.end()) throw ExecProcess::not_found(container_id_, exec_id);
  return it->second;
}

void ExecTable::add_locked(const std::shared_ptr<ExecProcess>& p) {
  if (!execs_.emplace(p->exec_id(), p).second)
    throw Error(Code::AlreadyExists, "exec \"" + p->exec_id() + "\" of container \"" + container_id_ + "\" already exists");
}

void ExecTable::erase_locked(const std::string& exec_id) {
  execs_.erase(exec_id);
}

std::map<std::string, pid_t> ExecTable::pids_locked() const {
  std::map<std::string, pid_t> out;
  for (const auto& [id, p] : execs_)
    if (pid_t pid = p->pid(); pid > 0) out[id] = pid;
  return out;
}

size_t ExecTable::running_locked() const {
  size_t n = 0;
  for (const auto& [id, p] : execs_)
    if (p->running_locked()) ++n;
  return n;
}

}  // namespace nvproxy::shim
