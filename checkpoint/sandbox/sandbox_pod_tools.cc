#include "checkpoint/sandbox/sandbox_pod_tools.h"

#include <algorithm>

#include "common/error.h"

namespace nvproxy::checkpoint {

namespace {

// The pids given, by the container each belongs to, as that container knows them.
std::map<std::size_t, std::vector<pid_t>> by_member(const PodPids& ids, const std::vector<pid_t>& pids) {
  std::map<std::size_t, std::vector<pid_t>> out;
  for (pid_t p : pids) out[ids.member(p)].push_back(ids.local(p));
  return out;
}

}  // namespace

pid_t PodPids::encode(std::size_t member, pid_t p) const {
  if (p < 0 || p >= kStride)
    throw Error(Code::Internal, "pid " + std::to_string(p) + " of container \"" + name(member) +
                                    "\" is past the pids a pod's checkpoint numbers apart (" + std::to_string(kStride) + ")");
  return static_cast<pid_t>(member) * kStride + p;
}

std::string PodPids::whose(pid_t pid) const {
  if (member(pid) == 0 || member(pid) >= size()) return "";
  return "pid " + std::to_string(local(pid)) + " of container \"" + name(member(pid)) + "\"";
}

std::string PodPids::legend(const std::vector<pid_t>& pids) const {
  std::set<pid_t> sorted(pids.begin(), pids.end());
  std::string others;
  for (pid_t p : sorted)
    if (std::string w = whose(p); !w.empty()) others += (others.empty() ? "" : ", ") + std::to_string(p) + " is " + w;
  if (others.empty()) return "";
  return "the pod's GPU containers number their processes apart: " + others + "; pids below " + std::to_string(kStride) +
         " are container \"" + name(0) + "\"'s";
}

std::vector<pid_t> PodLister::list() {
  std::vector<pid_t> out;
  for (std::size_t k = 0; k < m_.size(); ++k)
    for (pid_t p : m_[k].lister->list()) out.push_back(ids_.encode(k, p));
  std::sort(out.begin(), out.end());
  std::lock_guard lk(mu_);
  seen_.insert(out.begin(), out.end());
  return out;
}

std::vector<pid_t> PodLister::listed(const std::vector<pid_t>& pids) const {
  std::lock_guard lk(mu_);
  std::vector<pid_t> out;
  for (pid_t p : pids)
    if (seen_.contains(p)) out.push_back(p);
  return out;
}

std::vector<Holder> PodHolderScanner::scan(const std::vector<pid_t>& pids) {
  std::vector<Holder> out;
  for (const auto& [k, local] : by_member(ids_, pids)) {
    if (k >= m_.size()) continue;  // not a pid of this pod's
    for (Holder h : m_[k].scanner->scan(local)) {
      h.pid = ids_.encode(k, h.pid);
      out.push_back(std::move(h));
    }
  }
  return out;
}

std::optional<ProcInfo> PodHolderScanner::info(pid_t pid) {
  const std::size_t k = ids_.member(pid);
  if (k >= m_.size()) return std::nullopt;
  auto pi = m_[k].scanner->info(ids_.local(pid));
  if (!pi) return pi;
  pi->pid = ids_.encode(k, pi->pid);
  if (pi->ppid > 0) pi->ppid = ids_.encode(k, pi->ppid);
  return pi;
}

std::string PodCudaToggler::describe() {
  for (const auto& m : m_)
    if (m.toggler) return m.toggler->describe() + ", in each GPU container of the pod";
  return "none";
}

template <class Op>
auto PodCudaToggler::call(pid_t pid, const char* op, Op&& fn) {
  const std::size_t k = ids_.member(pid);
  if (k >= m_.size() || !m_[k].toggler)
    throw CudaError(pid, op, -1, "not asked", "no container of the pod numbers its processes from " + std::to_string(pid));
  const std::string where = "container \"" + m_[k].name + "\" pid " + std::to_string(ids_.local(pid));
  try {
    return fn(*m_[k].toggler, ids_.local(pid));
  } catch (const CudaError& e) {
    throw CudaError(pid, e.op(), e.driver_code(), e.driver_name(), where + (e.detail().empty() ? "" : ": " + e.detail()));
  }
}

CudaState PodCudaToggler::get_state(pid_t pid) {
  return call(pid, "get-state", [](CudaToggler& t, pid_t p) { return t.get_state(p); });
}
void PodCudaToggler::lock(pid_t pid, unsigned timeout_ms) {
  call(pid, "lock", [&](CudaToggler& t, pid_t p) { t.lock(p, timeout_ms); });
  log_.info(who_ + ": CUDA locked in container \"" + m_[ids_.member(pid)].name + "\" pid " + std::to_string(ids_.local(pid)));
}
void PodCudaToggler::checkpoint(pid_t pid) {
  call(pid, "checkpoint", [](CudaToggler& t, pid_t p) { t.checkpoint(p); });
  log_.info(who_ + ": CUDA checkpointed in container \"" + m_[ids_.member(pid)].name + "\" pid " +
            std::to_string(ids_.local(pid)));
}
void PodCudaToggler::restore(pid_t pid, const DeviceMap& map) {
  call(pid, "restore", [&](CudaToggler& t, pid_t p) { t.restore(p, map); });
  log_.info(who_ + ": CUDA restored in container \"" + m_[ids_.member(pid)].name + "\" pid " + std::to_string(ids_.local(pid)));
}
void PodCudaToggler::unlock(pid_t pid) {
  call(pid, "unlock", [](CudaToggler& t, pid_t p) { t.unlock(p); });
  log_.info(who_ + ": CUDA unlocked in container \"" + m_[ids_.member(pid)].name + "\" pid " + std::to_string(ids_.local(pid)));
}

std::map<pid_t, std::set<std::string>> PodGpuProbe::gpus_by_pid() {
  std::map<pid_t, std::set<std::string>> out;
  for (std::size_t k = 0; k < m_.size(); ++k) {
    if (!m_[k].probe) continue;
    for (auto& [p, gpus] : m_[k].probe->gpus_by_pid()) out[ids_.encode(k, p)] = std::move(gpus);
  }
  return out;
}

std::map<pid_t, CommFinding> PodCommProbe::scan(const std::vector<pid_t>& pids) {
  std::map<pid_t, CommFinding> out;
  for (const auto& [k, local] : by_member(ids_, pids)) {
    if (k >= m_.size() || !m_[k].comm) continue;
    for (auto& [p, f] : m_[k].comm->scan(local)) {
      std::set<pid_t> peers;
      for (pid_t q : f.tcp_peers) peers.insert(ids_.encode(k, q));
      f.tcp_peers = std::move(peers);
      out[ids_.encode(k, p)] = std::move(f);
    }
  }
  return out;
}

bool PodFileIdentity::same_file(pid_t pid_a, int fd_a, pid_t pid_b, int fd_b) {
  const std::size_t k = ids_.member(pid_a);
  if (k != ids_.member(pid_b) || k >= m_.size() || !m_[k].files) return false;
  return m_[k].files->same_file(ids_.local(pid_a), fd_a, ids_.local(pid_b), fd_b);
}

std::string PodFileIdentity::unknown_because(pid_t pid_a, pid_t pid_b) {
  const std::size_t k = ids_.member(pid_a);
  if (k != ids_.member(pid_b)) return "";  // known: two containers' processes share no open file
  if (k >= m_.size() || !m_[k].files) return "no file identity for the container";
  return m_[k].files->unknown_because(ids_.local(pid_a), ids_.local(pid_b));
}

void drop_in_pod(const PodPids& ids, const std::vector<PodMemberTools>& m, const ReleasePlan& plan) {
  std::map<std::size_t, ReleasePlan> parts;
  for (ReleasedProcess p : plan.processes) {
    const std::size_t k = ids.member(p.pid);
    if (k >= m.size() || !m[k].drop)
      throw Error(Code::Internal, "pid " + std::to_string(p.pid) + ": no container of the pod to drop its device files in");
    p.pid = ids.local(p.pid);
    p.from = ids.local(p.from);
    parts[k].processes.push_back(std::move(p));
  }
  for (auto& [k, part] : parts) {
    part.devices = plan.devices;
    m[k].drop(part);
  }
}

}  // namespace nvproxy::checkpoint
