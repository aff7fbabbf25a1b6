#include "common/error.h"

#include <cstring>
#include <filesystem>
#include <new>
#include <typeinfo>

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

Error error_from_current_exception(std::string_view operation) {
  const std::string op(operation);
  try {
    throw;
  } catch (const Error& e) {
    return Error(e.code(), e.what());
  } catch (const std::filesystem::filesystem_error& e) {
    Error base = sys_error(op, e.code().value());
    std::string paths;
    if (!e.path1().empty()) paths += " " + e.path1().string();
    if (!e.path2().empty()) paths += " " + e.path2().string();
    return Error(base.code(), op + ": filesystem error" + paths + ": " + e.code().message());
  } catch (const std::bad_alloc&) {
    return Error(Code::ResourceExhausted, op + ": out of memory");
  } catch (const std::invalid_argument& e) {
    return Error(Code::InvalidArgument, op + ": invalid argument: " + e.what());
  } catch (const std::out_of_range& e) {
    return Error(Code::InvalidArgument, op + ": value out of range: " + e.what());
  } catch (const std::domain_error& e) {
    return Error(Code::InvalidArgument, op + ": value out of domain: " + e.what());
  } catch (const std::length_error& e) {
    return Error(Code::InvalidArgument, op + ": value too long: " + e.what());
  } catch (const std::exception& e) {
    return Error(Code::Internal, op + ": " + e.what());
  } catch (...) {
    return Error(Code::Internal, op + ": a non-standard exception");
  }
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
