#include "shim/task/task_rpc.h"

#include "proto/wkt.pb.h"

#include "common/error.h"
#include "common/text.h"
#include "common/ttrpc/server.h"
#include "shim/task/task_service.h"

namespace nvproxy::shim {

namespace task = containerd::task::v2;

namespace {

template <typename Req>
Req decode(const std::string& payload, const char* method) {
  Req r;
  if (!r.ParseFromString(payload)) throw Error(Code::InvalidArgument, std::string("Task.") + method + ": cannot decode request");
  return r;
}

// Runs one call; what the standard library throws from it (a number out of range, bad_alloc, a
// filesystem error) becomes an Error with a code that names the method and the container, never
// Unknown. An Error passes as it is.
template <typename Req, typename Fn>
std::string call(const char* method, const std::string& payload, Fn fn) {
  const Req r = decode<Req>(payload, method);
  try {
    return fn(r);
  } catch (const Error&) {
    throw;
  } catch (...) {
    throw error_from_current_exception(std::string("Task.") + method + " of container " + quote_value(r.id()));
  }
}

// A method returning a message.
template <typename Req, typename Fn>
void bind(ttrpc::Server& s, const char* method, Fn fn) {
  s.register_method(kTaskServiceName, method, [fn, method](const ttrpc::CallContext&, const std::string& payload) {
    return call<Req>(method, payload, [&](const Req& r) { return fn(r).SerializeAsString(); });
  });
}

// A method returning google.protobuf.Empty.
template <typename Req, typename Fn>
void bind_empty(ttrpc::Server& s, const char* method, Fn fn) {
  s.register_method(kTaskServiceName, method, [fn, method](const ttrpc::CallContext&, const std::string& payload) {
    return call<Req>(method, payload, [&](const Req& r) {
      fn(r);
      return wkt::Empty().SerializeAsString();
    });
  });
}

}  // namespace

void register_task_service(ttrpc::Server& s, TaskService& svc) {
  bind<task::CreateTaskRequest>(s, "Create", [&](const auto& r) { return svc.create(r); });
  bind<task::StartRequest>(s, "Start", [&](const auto& r) { return svc.start(r); });
  bind<task::StateRequest>(s, "State", [&](const auto& r) { return svc.state(r); });
  bind<task::DeleteRequest>(s, "Delete", [&](const auto& r) { return svc.remove(r); });
  bind<task::PidsRequest>(s, "Pids", [&](const auto& r) { return svc.pids(r); });
  bind<task::WaitRequest>(s, "Wait", [&](const auto& r) { return svc.wait(r); });
  bind<task::StatsRequest>(s, "Stats", [&](const auto& r) { return svc.stats(r); });
  bind<task::ConnectRequest>(s, "Connect", [&](const auto& r) { return svc.connect(r); });
  bind_empty<task::KillRequest>(s, "Kill", [&](const auto& r) { svc.kill(r); });
  bind_empty<task::ExecProcessRequest>(s, "Exec", [&](const auto& r) { svc.exec(r); });
  bind_empty<task::PauseRequest>(s, "Pause", [&](const auto& r) { svc.pause(r); });
  bind_empty<task::ResumeRequest>(s, "Resume", [&](const auto& r) { svc.resume(r); });
  bind_empty<task::CloseIORequest>(s, "CloseIO", [&](const auto& r) { svc.close_io(r); });
  bind_empty<task::ResizePtyRequest>(s, "ResizePty", [&](const auto& r) { svc.resize_pty(r); });
  bind_empty<task::UpdateTaskRequest>(s, "Update", [&](const auto& r) { svc.update(r); });
  bind_empty<task::CheckpointTaskRequest>(s, "Checkpoint", [&](const auto& r) { svc.checkpoint(r); });
  bind_empty<task::ShutdownRequest>(s, "Shutdown", [&](const auto& r) { svc.shutdown(r); });
}

}  // namespace nvproxy::shim
