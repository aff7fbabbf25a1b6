#include "shim/kit/bootstrap.h"

#include "common/error.h"
#include "proto/bootstrap.pb.h"
#include "proto/runc_options.pb.h"
#include "proto/runctypes.pb.h"

namespace nvproxy::shim {

namespace bootapi = containerd::runtime::bootstrap::v1;

namespace {

// The message name of a type URL ("types.containerd.io/x.y.Z" or "x.y.Z" -> "x.y.Z").
std::string message_name(const std::string& url) {
  auto slash = url.rfind('/');
  return slash == std::string::npos ? url : url.substr(slash + 1);
}

template <typename M>
std::string shim_cgroup_as(const wkt::Any& any) {
  M m;
  return m.ParseFromString(any.value()) ? m.shim_cgroup() : std::string();
}

}  // namespace

StartInput parse_start_input(const std::string& input, const std::string& id, const std::string& ns) {
  StartInput in;
  if (input.empty()) return in;
  // Read as an Any first: BootstrapParams' instance_id and namespace are fields 1 and 2, the Any's
  // type_url and value (bytes, never checked as UTF-8). Only when they are this shim's -id and
  // -namespace is the input BootstrapParams; a legacy Any's value (IoUid and IoGid varints, say)
  // is never parsed as the string `namespace`.
  wkt::Any any;
  if (!any.ParseFromString(input)) return in;
  if (any.type_url() != id || any.value() != ns) {
    if (!any.type_url().empty()) in.options.push_back(std::move(any));
    return in;
  }
  bootapi::BootstrapParams params;
  if (!params.ParseFromString(input)) return in;
  in.bootstrap = true;
  for (const auto& ext : params.extensions())
    if (ext.has_value()) in.options.push_back(ext.value());
  if (params.has_socket_dir() && !params.socket_dir().empty()) {
    if (params.socket_dir().front() != '/')
      throw Error(Code::InvalidArgument, "start: socket_dir \"" + params.socket_dir() + "\" is not an absolute path");
    in.socket_dir = params.socket_dir();
  }
  in.debug = params.log_level() <= bootapi::LOG_LEVEL_DEBUG;
  in.grpc_address = params.containerd_grpc_address();
  return in;
}

std::string shim_cgroup_of(const std::vector<wkt::Any>& options) {
  for (const auto& any : options) {
    std::string name = message_name(any.type_url());
    std::string cg;
    if (name == "containerd.runc.v1.Options")
      cg = shim_cgroup_as<containerd::runc::v1::Options>(any);
    else if (name == "containerd.linux.runc.CreateOptions")
      cg = shim_cgroup_as<containerd::linux::runc::CreateOptions>(any);
    if (!cg.empty()) return cg;
  }
  return {};
}

std::string bootstrap_result(const std::string& address) {
  bootapi::BootstrapResult r;
  r.set_version(2);
  r.set_address(address);
  r.set_protocol("ttrpc");
  return r.SerializeAsString();
}

}  // namespace nvproxy::shim
