// libprotobuf reports some input problems itself (a string field that is not UTF-8), on stderr by
// default. `start`'s stderr is part of what containerd 1.6-2.2 read as the shim's address, and the
// daemon's is containerd's: route those messages to the shim's logger instead, or drop them.
#pragma once

#include "common/log.h"

namespace nvproxy::shim {

// From now on libprotobuf's messages go to `log` as warnings (nullptr: they are dropped). `log`
// must outlive the route, or be replaced first. Call before other threads parse protobuf.
void route_protobuf_log(Logger* log);

}  // namespace nvproxy::shim
