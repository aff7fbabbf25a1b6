#include "checkpoint/helper/cuda_helper_service.h"

#include <string>

#include "checkpoint/shared/cuda_helper_wire.h"

namespace nvproxy::checkpoint {

namespace pb = nvproxy::cuda::v1;

namespace {

template <typename Msg>
Msg decode(const std::string& method, const std::string& payload) {
  Msg m;
  if (!m.ParseFromString(payload)) throw Error(Code::InvalidArgument, method + ": cannot decode the request");
  return m;
}

pid_t pid_of(const std::string& method, const pb::ProcessRequest& r) {
  if (r.pid() <= 0) throw Error(Code::InvalidArgument, method + " needs a positive pid, got " + std::to_string(r.pid()));
  return r.pid();
}

// A CudaError leaves as a status with its CudaFailure detail; other errors as their code and text.
template <typename Fn>
std::string answering(Fn&& fn) {
  try {
    return fn();
  } catch (const CudaError& e) {
    throw helper_wire::to_status(e);
  }
}

}  // namespace

void register_cuda_helper_service(ttrpc::Server& server, CudaToggler& t, GpuUsageProbe& probe) {
  const std::string svc = helper_wire::kService;
  server.register_method(svc, "Describe", [&t](const ttrpc::CallContext&, const std::string&) {
    return answering([&] {
      pb::DescribeResponse r;
      r.set_toggler(t.describe());
      return r.SerializeAsString();
    });
  });
  server.register_method(svc, "GetState", [&t](const ttrpc::CallContext&, const std::string& payload) {
    return answering([&] {
      pb::StateResponse r;
      r.set_state(helper_wire::state_to_wire(t.get_state(pid_of("GetState", decode<pb::ProcessRequest>("GetState", payload)))));
      return r.SerializeAsString();
    });
  });
  // The four transitions take a pid and answer Empty.
  using Transition = void (*)(CudaToggler&, const pb::ProcessRequest&);
  const std::pair<const char*, Transition> transitions[] = {
      {"Lock", [](CudaToggler& x, const pb::ProcessRequest& r) { x.lock(pid_of("Lock", r), r.timeout_ms()); }},
      {"Checkpoint", [](CudaToggler& x, const pb::ProcessRequest& r) { x.checkpoint(pid_of("Checkpoint", r)); }},
      {"Restore",
       [](CudaToggler& x, const pb::ProcessRequest& r) {
         DeviceMap map;
         for (const auto& p : r.device_map()) map.push_back({p.from(), p.to()});
         x.restore(pid_of("Restore", r), map);
       }},
      {"Unlock", [](CudaToggler& x, const pb::ProcessRequest& r) { x.unlock(pid_of("Unlock", r)); }},
  };
  for (const auto& [name, fn] : transitions) {
    server.register_method(svc, name,
                           [&t, name = std::string(name), fn = fn](const ttrpc::CallContext&, const std::string& payload) {
                             return answering([&] {
                               fn(t, decode<pb::ProcessRequest>(name, payload));
                               return pb::Empty().SerializeAsString();
                             });
                           });
  }
  server.register_method(svc, "GpusByPid", [&probe](const ttrpc::CallContext&, const std::string&) {
    pb::GpusByPidResponse r;
    for (const auto& [pid, gpus] : probe.gpus_by_pid()) {
      auto& list = (*r.mutable_gpus())[pid];
      for (const auto& g : gpus) list.add_uuids(g);
    }
    return r.SerializeAsString();
  });
  server.register_method(svc, "HostFacts", [&probe](const ttrpc::CallContext&, const std::string&) {
    return helper_wire::to_wire(probe.host_facts()).SerializeAsString();
  });
}

void register_hold_service(ttrpc::Server& server, ThreadHold& hold, std::function<pid_t(pid_t)> restore_tid_of) {
  const std::string svc = helper_wire::kService;
  server.register_method(svc, "Hold", [&hold, restore_tid_of](const ttrpc::CallContext&, const std::string& payload) {
    return answering([&] {
      auto req = decode<pb::HoldRequest>("Hold", payload);
      std::vector<ThreadHold::Target> targets;
      for (int32_t pid : req.pids()) {
        if (pid <= 0) throw Error(Code::InvalidArgument, "Hold needs positive pids, got " + std::to_string(pid));
        targets.push_back({.pid = pid, .restore_tid = restore_tid_of(pid)});
      }
      pb::HoldResponse r;
      if (req.settle()) hold.settle();
      for (pid_t p : req.frozen() ? hold.hold_frozen(targets) : req.stopped() ? hold.hold_stopped(targets) : hold.hold(targets))
        r.add_ended(p);
      return r.SerializeAsString();
    });
  });
  server.register_method(svc, "Release", [&hold](const ttrpc::CallContext&, const std::string& payload) {
    return answering([&] {
      auto req = decode<pb::ReleaseRequest>("Release", payload);
      if (req.pids().empty())
        hold.release();
      else
        hold.release(std::vector<pid_t>(req.pids().begin(), req.pids().end()));
      return pb::Empty().SerializeAsString();
    });
  });
}

}  // namespace nvproxy::checkpoint
