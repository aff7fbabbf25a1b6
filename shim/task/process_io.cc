#include "shim/task/process_io.h"

#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "shim/task/binary_io.h"
#include "shim/task/pipe_io.h"

namespace nvproxy::shim {

namespace {

std::unique_ptr<ProcessIO> open_io(const StdioPaths& paths, const IoOwner& owner) {
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

// Only the pipes: an absent stream is /dev/null, which stays root's.
void chown_pipes(const ProcessIO& io, const IoOwner& owner) {
  oci::Stdio st = io.child_stdio();
  for (int fd : {st.in, st.out, st.err}) {
    struct stat sb {};
    if (fd < 0 || ::fstat(fd, &sb) < 0 || !S_ISFIFO(sb.st_mode)) continue;
    if (::fchown(fd, owner.uid, owner.gid) < 0)
      throw sys_error("chown the stdio pipes of container \"" + owner.container_id + "\" to IoUid " + std::to_string(owner.uid) +
                      " IoGid " + std::to_string(owner.gid));
  }
}

}  // namespace

std::unique_ptr<ProcessIO> open_process_io(const StdioPaths& paths, const IoOwner& owner) {
  auto io = open_io(paths, owner);
  if (owner.uid != 0 || owner.gid != 0) chown_pipes(*io, owner);
  return io;
}

}  // namespace nvproxy::shim
