#include "shim/task/process_io.h"

#include "common/error.h"
#include "shim/task/binary_io.h"
#include "shim/task/pipe_io.h"

namespace nvproxy::shim {

std::unique_ptr<ProcessIO> open_process_io(const StdioPaths& paths, const IoOwner& owner) {
  auto colon = paths.out.find("://");
  std::string scheme = colon == std::string::npos ? "" : paths.out.substr(0, colon);
  if (scheme.empty()) return std::make_unique<PipeIO>(paths);
  std::string rest = paths.out.substr(colon + 3);
  if (scheme == "fifo") return std::make_unique<PipeIO>(StdioPaths{paths.in, rest, paths.err, false});
  if (scheme == "binary") return std::make_unique<BinaryIO>(paths.out, owner);
  if (scheme == "file") {
    if (rest.empty() || rest.front() != '/')
      throw Error(Code::InvalidArgument, "log URI \"" + paths.out + "\" does not name an absolute path");
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(rest).parent_path(), ec);
    return std::make_unique<PipeIO>(StdioPaths{paths.in, rest, rest, false});
  }
  throw Error(Code::InvalidArgument, "unknown stdio scheme \"" + scheme + "\" in \"" + paths.out + "\"");
}

}  // namespace nvproxy::shim
