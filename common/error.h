// The one error convention at module seams (see docs/conventions.md):
// functions that can fail throw nvproxy::Error, which carries a gRPC status code and a message that
// already names the object involved (container id, pid, file). The ttrpc server turns it into a
// status; CLI entry points print it and exit non-zero. Nothing else crosses a module seam.
#pragma once

#include <cerrno>
#include <stdexcept>
#include <string>
#include <string_view>

namespace nvproxy {

// gRPC status codes, as ttrpc carries them.
enum class Code : int {
  Ok = 0,
  Cancelled = 1,
  Unknown = 2,
  InvalidArgument = 3,
  DeadlineExceeded = 4,
  NotFound = 5,
  AlreadyExists = 6,
  PermissionDenied = 7,
  ResourceExhausted = 8,
  FailedPrecondition = 9,
  Aborted = 10,
  OutOfRange = 11,
  Unimplemented = 12,
  Internal = 13,
  Unavailable = 14,
  DataLoss = 15,
  Unauthenticated = 16,
};

std::string_view code_name(Code c);

// The message a status carries to containerd. Its client appends the status's class word to it
// (errdefs.FromGRPC: "<message>: <class>", e.g. ": unknown", ": failed precondition"), which would
// complete the last sentence of a multi-line report ("...; the container keeps running: unknown").
// A multi-line message therefore ends with a line "status", which the word completes instead
// ("status: unknown"); a one-line message is left as it is (the usual "<what> failed: <cause>: <class>").
std::string status_message(std::string message);

class Error : public std::runtime_error {
 public:
  Error(Code code, const std::string& message) : std::runtime_error(message), code_(code) {}
  [[nodiscard]] Code code() const { return code_; }

 private:
  Code code_;
};

// Called inside a catch block: the exception in flight as an Error whose message names
// `operation` (the RPC or verb and the object it was for). An Error keeps its code; what the
// standard library throws gets one: invalid_argument, out_of_range, domain_error and length_error
// (a value that did not fit) InvalidArgument, bad_alloc ResourceExhausted, filesystem_error the
// code of its errno with its paths, anything else Internal. Never Unknown.
Error error_from_current_exception(std::string_view operation);

// An Error for a failed system call: "<context>: <strerror(err)>", code mapped from errno.
Error sys_error(std::string_view context, int err = errno);

}  // namespace nvproxy
