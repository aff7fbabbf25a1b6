#include "common/error.h"

#include <cstring>

namespace nvproxy {

std::string_view code_name(Code c) {
  switch (c) {
    case Code::Ok: return "OK";
    case Code::Cancelled: return "Canceled";
    case Code::Unknown: return "Unknown";
    case Code::InvalidArgument: return "InvalidArgument";
    case Code::DeadlineExceeded: return "DeadlineExceeded";
    case Code::NotFound: return "NotFound";
    case Code::AlreadyExists: return "AlreadyExists";
    case Code::PermissionDenied: return "PermissionDenied";
    case Code::ResourceExhausted: return "ResourceExhausted";
    case Code::FailedPrecondition: return "FailedPrecondition";
    case Code::Aborted: return "Aborted";
    case Code::OutOfRange: return "OutOfRange";
    case Code::Unimplemented: return "Unimplemented";
    case Code::Internal: return "Internal";
    case Code::Unavailable: return "Unavailable";
    case Code::DataLoss: return "DataLoss";
    case Code::Unauthenticated: return "Unauthenticated";
  }
  return "Unknown";
}

std::string status_message(std::string message) {
  while (!message.empty() && message.back() == '\n') message.pop_back();
  if (message.find('\n') == std::string::npos) return message;
  return message + "\nstatus";
}

Error sys_error(std::string_view context, int err) {
  Code code = Code::Internal;
  switch (err) {
    case ENOENT:
    case ESRCH: code = Code::NotFound; break;
    case EEXIST: code = Code::AlreadyExists; break;
    case EACCES:
    case EPERM: code = Code::PermissionDenied; break;
    case EINVAL: code = Code::InvalidArgument; break;
    case ETIMEDOUT: code = Code::DeadlineExceeded; break;
    default: break;
  }
  return Error(code, std::string(context) + ": " + std::strerror(err));
}

}  // namespace nvproxy
