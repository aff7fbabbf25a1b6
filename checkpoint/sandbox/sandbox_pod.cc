#include "checkpoint/sandbox/sandbox_pod.h"

#include "checkpoint/sandbox/sandbox_assembly.h"

namespace nvproxy::checkpoint {

struct PodSandboxAssembly::Member {
  Member(const CheckpointConfig& cfg, PodSandboxContainer c, ProcessRunner& runner)
      : name(std::move(c.name)), t(cfg, std::move(c.target), runner) {}
  std::string name;
  SandboxContainerTools t;

  PodMemberTools seams() {
    return {.name = name,
            .lister = &t.lister,
            .scanner = &t.scanner,
            .toggler = t.toggler.get(),
            .probe = &t.probe,
            .comm = &t.comm,
            .files = &t.files,
            .drop = [this](const ReleasePlan& plan) { drop_in_sandbox(t.agent, plan, t.agent.target().timeout); }};
  }
};

namespace {

std::vector<std::string> names_of(const std::vector<PodSandboxContainer>& cs) {
  std::vector<std::string> names;
  for (const auto& c : cs) names.push_back(c.name);
  return names;
}

}  // namespace

PodSandboxAssembly::PodSandboxAssembly(const CheckpointConfig& cfg, std::vector<PodSandboxContainer> containers,
                                       const std::string& who, ProcessRunner& runner, Logger& log)
    : ids_(names_of(containers)),
      lister_(ids_, seams_),
      scanner_(ids_, seams_),
      toggler_(cfg.cuda == "none" ? nullptr : std::make_unique<PodCudaToggler>(ids_, seams_, who, log)),
      probe_(ids_, seams_),
      comm_(ids_, seams_),
      files_(ids_, seams_),
      host_usage_(make_cuda_helper(cfg, runner)),
      memory_(cfg.host_meminfo),
      reservations_(cfg.staging_account),
      orch_(cfg, sandbox_orchestrator_tools(lister_, scanner_, toggler_.get(), probe_, comm_, files_, memory_, reservations_),
            log) {
  // The composites hold references to seams_, filled here (before any call reaches them).
  for (auto& c : containers) {
    members_.push_back(std::make_unique<Member>(cfg, std::move(c), runner));
    seams_.push_back(members_.back()->seams());
  }
}

PodSandboxAssembly::~PodSandboxAssembly() = default;

ProcessIdentity PodSandboxAssembly::identify(pid_t pid) {
  auto pi = scanner_.info(pid);
  return {.host_pid = pid, .pid = ids_.local(pid), .name = pi ? pi->name : std::string()};
}

std::string PodSandboxAssembly::label() const {
  std::string names;
  for (std::size_t k = 0; k < ids_.size(); ++k) names += (names.empty() ? "" : ", ") + ids_.name(k);
  return " (runsc sandbox; the pod's GPU containers " + names + ")";
}

ReleasePlan PodSandboxAssembly::release_before_snapshot(const ReleasePlan& plan) {
  if (plan.empty()) return plan;
  drop_in_pod(ids_, seams_, plan);
  return {};
}

std::string PodSandboxAssembly::pod_member_of(pid_t pid) const {
  const std::size_t k = ids_.member(pid);
  return k == 0 || k >= ids_.size() ? std::string() : ids_.name(k);
}

std::vector<std::string> PodSandboxAssembly::pod_members() const {
  std::vector<std::string> out;
  for (std::size_t k = 1; k < ids_.size(); ++k) out.push_back(ids_.name(k));
  return out;
}

}  // namespace nvproxy::checkpoint
