#include "shim/task/container.h"

#include "shim/task/exec_process.h"
#include "shim/task/init_process.h"
#include "shim/task/task_context.h"

namespace nvproxy::shim {

Container::Container(ContainerSetup setup, std::unique_ptr<oci::Runtime> runtime, ContainerEnv env)
    : ctx_(std::make_unique<TaskContext>(*this, std::move(setup), std::move(runtime), std::move(env))),
      execs_(ctx_->setup.id),
      init_(std::make_shared<InitProcess>(*ctx_, execs_)) {}

Container::~Container() {
  if (pid_t pid = init_->pid(); pid > 0 && !ctx_->setup.shares_sandbox_pid) ctx_->env.exits.forget(pid);
}

std::shared_ptr<Container> Container::create(ContainerSetup setup, std::unique_ptr<oci::Runtime> runtime, ContainerEnv env) {
  std::shared_ptr<Container> c(new Container(std::move(setup), std::move(runtime), std::move(env)));
  c->ctx_->owner = c;
  c->init_->create();
  return c;
}

const std::string& Container::id() const {
  return ctx_->setup.id;
}
const std::filesystem::path& Container::bundle() const {
  return ctx_->setup.bundle;
}
const ShimConfig& Container::config() const {
  return ctx_->setup.config;
}
bool Container::gpu() const {
  return ctx_->setup.gpu;
}
oci::Runtime& Container::runtime() {
  return *ctx_->runtime;
}
const ContainerSetup& Container::setup() const {
  return ctx_->setup;
}
std::shared_ptr<Container> Container::held() const {
  return ctx_->owner.lock();
}
pid_t Container::init_pid() const {
  return init_->pid();
}
std::optional<cgroup::CgroupPaths> Container::init_cgroup() const {
  return init_->cgroup();
}

std::shared_ptr<Process> Container::process(const std::string& exec_id) const {
  if (exec_id.empty()) return init_;
  std::lock_guard lk(ctx_->mu);
  return execs_.find_locked(exec_id);
}

ProcStatus Container::status(const std::string& exec_id) const {
  return process(exec_id)->status();
}

std::map<std::string, pid_t> Container::exec_pids() const {
  std::lock_guard lk(ctx_->mu);
  return execs_.pids_locked();
}

pid_t Container::start(const std::string& exec_id) {
  return process(exec_id)->start();
}

void Container::kill(const std::string& exec_id, int signal, bool all) {
  process(exec_id)->kill(signal, all);
}

void Container::resize(const std::string& exec_id, unsigned width, unsigned height) {
  process(exec_id)->resize(width, height);
}

std::shared_ptr<Process> Container::remove(const std::string& exec_id) {
  auto p = process(exec_id);
  p->remove();
  return p;
}

void Container::pause() {
  init_->pause();
}
void Container::resume() {
  init_->resume();
}
void Container::update(const nlohmann::json& resources) {
  init_->update(resources);
}
void Container::checkpoint(const oci::CheckpointFlags& flags) {
  init_->checkpoint(flags);
}

void Container::add_exec(const std::string& exec_id, nlohmann::json spec, StdioPaths stdio) {
  auto ex = std::make_shared<ExecProcess>(*ctx_, *init_, execs_, exec_id, std::move(stdio), std::move(spec));
  std::lock_guard lk(ctx_->mu);
  init_->check_accepts_exec_locked("exec \"" + exec_id + "\" in it");
  execs_.add_locked(ex);
  ctx_->events.exec_added(exec_id);
}

}  // namespace nvproxy::shim
