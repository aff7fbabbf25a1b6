// `-info` (containerd 2.x runs it before tasks are created): the runtime options on stdin (a
// protobuf Any, optional), the RuntimeInfo protobuf on stdout: our runtime type and version, the
// options echoed back, and the OCI runtime's own `features` (JSON) when it has that command.
#pragma once

#include <iosfwd>

namespace nvproxy::shim {

int info_main(std::istream& in, std::ostream& out);

}  // namespace nvproxy::shim
