// What `start` reads on stdin and what it answers. containerd 2.3+ sends a binary BootstrapParams
// (containerd.runtime.bootstrap.v1) with the runtime options among its extensions, and accepts a
// binary BootstrapResult; containerd 1.6-2.2 send the runtime options alone (a protobuf Any, or
// nothing) and read the bare address. Both decode as an Any (BootstrapParams' instance_id and
// namespace are its type_url and value): the input is BootstrapParams only when those are the -id
// and -namespace flags; otherwise it is the legacy Any, whose bytes are never read as strings (an
// IoUid's varint in `namespace` is invalid UTF-8, and libprotobuf would log about it).
#pragma once

#include <string>
#include <vector>

#include "proto/wkt.pb.h"

namespace nvproxy::shim {

struct StartInput {
  bool bootstrap = false;         // a BootstrapParams for this shim: answer with bootstrap_result()
  std::vector<wkt::Any> options;  // runtime options: the legacy Any, or the params' extensions
  std::string socket_dir;         // the params' socket_dir; empty: the default
  bool debug = false;             // the params ask for debug (or more verbose) logging
  std::string grpc_address;       // the params' containerd_grpc_address
};

// Never fails on input it does not understand (`start` must not fail on options only Create
// interprets): that gives no options. Throws InvalidArgument for a relative socket_dir.
StartInput parse_start_input(const std::string& input, const std::string& id, const std::string& ns);

// The shim_cgroup of the first runc-style options (containerd.runc.v1.Options or
// containerd.linux.runc.CreateOptions) that name one; "" when none does or they do not decode.
std::string shim_cgroup_of(const std::vector<wkt::Any>& options);

// A serialized BootstrapResult: task API version 2 (containerd.task.v2, what the daemon serves),
// protocol ttrpc, and `address` ("unix:///...").
std::string bootstrap_result(const std::string& address);

}  // namespace nvproxy::shim
