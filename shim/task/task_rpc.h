// Binds the Task service's methods to ttrpc: decode request, call, encode response.
#pragma once

namespace nvproxy::ttrpc {
class Server;
}

namespace nvproxy::shim {

class TaskService;
inline constexpr const char* kTaskServiceName = "containerd.task.v2.Task";

void register_task_service(ttrpc::Server& server, TaskService& svc);

}  // namespace nvproxy::shim
