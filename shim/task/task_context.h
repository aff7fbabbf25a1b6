// What one container's processes share with it: what Create brought, the runtime that runs them,
// the shim around them, their events, the rootfs, and the container's two locks (container.h says
// what each guards and when it is taken). The Container owns it; its processes hold a reference,
// so that neither reaches into the other's members.
#pragma once

#include <memory>
#include <mutex>
#include <optional>

#include "oci/runtime.h"
#include "shim/task/container.h"
#include "shim/task/rootfs.h"
#include "shim/task/task_events.h"

namespace nvproxy::shim {

struct TaskContext {
  TaskContext(Container& c, ContainerSetup s, std::unique_ptr<oci::Runtime> rt, ContainerEnv e)
      : container(c), setup(std::move(s)), runtime(std::move(rt)), env(std::move(e)), events(env.events, setup.id) {}

  Container& container;  // what the checkpoint hooks are handed
  // The same container, weakly: what an exit's handling and a background kill hold alive.
  std::weak_ptr<Container> owner;
  const ContainerSetup setup;
  const std::unique_ptr<oci::Runtime> runtime;
  ContainerEnv env;
  TaskEvents events;
  std::optional<RootfsMount> rootfs;  // mounted by the init's create, unmounted by its delete
  std::mutex op_mu;
  std::mutex mu;
};

}  // namespace nvproxy::shim
