#include "checkpoint/shared/cuda_helper_wire.h"

#include <string>

namespace nvproxy::checkpoint::helper_wire {

namespace pb = nvproxy::cuda::v1;

ttrpc::StatusError to_status(const CudaError& e) {
  pb::CudaFailure f;
  f.set_pid(e.pid());
  f.set_op(e.op());
  f.set_driver_code(e.driver_code());
  f.set_driver_name(e.driver_name());
  f.set_detail(e.detail());
  return {e.code(), e.what(), {{kCudaFailureType, f.SerializeAsString()}}};
}

void rethrow(const ttrpc::StatusError& e) {
  if (const auto* d = e.find(kCudaFailureType)) {
    pb::CudaFailure f;
    if (!f.ParseFromString(d->value)) {
      throw Error(Code::Internal, std::string("nvproxy-cuda-helper sent a malformed CUDA failure with: ") + e.what());
    }
    throw CudaError(f.pid(), f.op(), f.driver_code(), f.driver_name(), f.detail());
  }
  throw e;
}

CudaState state_from_wire(int state) {
  if (state < 0 || state > static_cast<int>(CudaState::Failed)) {
    throw Error(Code::Internal, "nvproxy-cuda-helper answered an unknown CUDA state " + std::to_string(state));
  }
  return static_cast<CudaState>(state);
}

pb::CudaState state_to_wire(CudaState s) {
  return static_cast<pb::CudaState>(static_cast<int>(s));
}

pb::HostFacts to_wire(const GpuHostFacts& f) {
  pb::HostFacts m;
  m.set_driver_version(f.driver_version);
  for (const auto& d : f.devices) {
    auto* o = m.add_devices();
    o->set_index(d.index);
    o->set_uuid(d.uuid);
    o->set_name(d.name);
    o->set_memory_total(d.memory_total);
    o->set_memory_free(d.memory_free);
    o->set_memory_used(d.memory_used);
  }
  for (const auto& [pid, uses] : f.processes) {
    for (const auto& u : uses) {
      auto* o = m.add_processes();
      o->set_pid(pid);
      o->set_uuid(u.uuid);
      if (u.used_bytes) o->set_used_bytes(*u.used_bytes);
    }
  }
  return m;
}

GpuHostFacts from_wire(const pb::HostFacts& m) {
  GpuHostFacts f;
  f.driver_version = m.driver_version();
  for (const auto& d : m.devices()) {
    f.devices.push_back({.index = d.index(),
                         .uuid = d.uuid(),
                         .name = d.name(),
                         .memory_total = d.memory_total(),
                         .memory_free = d.memory_free(),
                         .memory_used = d.memory_used()});
  }
  for (const auto& p : m.processes()) {
    GpuProcessUse u{.uuid = p.uuid()};
    if (p.has_used_bytes()) u.used_bytes = p.used_bytes();
    f.processes[p.pid()].push_back(std::move(u));
  }
  return f;
}

}  // namespace nvproxy::checkpoint::helper_wire
