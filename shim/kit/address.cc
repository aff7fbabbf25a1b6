#include "shim/kit/address.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/uuid/detail/sha1.hpp>
#include <cstdio>
#include <cstring>

#include "common/error.h"

namespace nvproxy::shim {

std::string socket_path(const std::string& containerd_address, const std::string& ns, const std::string& group_id,
                        const std::string& dir) {
  // Only uniqueness matters here (containerd reads the address we print), so Boost's SHA-1 serves.
  boost::uuids::detail::sha1 h;
  std::string key = containerd_address + "/" + ns + "/" + group_id;
  h.process_bytes(key.data(), key.size());
  boost::uuids::detail::sha1::digest_type d;
  h.get_digest(d);
  char hex[41];
  for (int i = 0; i < 5; ++i) std::snprintf(hex + 8 * i, 9, "%08x", d[i]);
  return dir + "/" + hex;
}

std::string strip_unix_scheme(const std::string& a) {
  return a.rfind("unix://", 0) == 0 ? a.substr(7) : a;
}

namespace {
sockaddr_un make_addr(const std::string& path) {
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (path.empty() || path[0] == '@') throw Error(Code::InvalidArgument, "socket \"" + path + "\": abstract sockets are refused");
  if (path.size() >= sizeof sa.sun_path)
    throw Error(Code::InvalidArgument, "socket path \"" + path + "\" is longer than " + std::to_string(sizeof sa.sun_path - 1));
  std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
  return sa;
}
}  // namespace

UniqueFd listen_unix(const std::string& path) {
  sockaddr_un sa = make_addr(path);
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  ::chmod(dir.c_str(), 0700);
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) throw sys_error("socket for " + path);
  // The socket is created 0600 from the start: no window where others could connect.
  mode_t old = ::umask(0177);
  int r = ::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa);
  int e = errno;
  ::umask(old);
  if (r < 0) throw sys_error("bind " + path, e);
  if (::listen(fd.get(), 128) < 0) throw sys_error("listen " + path);
  return fd;
}

bool can_connect(const std::string& path) {
  sockaddr_un sa;
  try {
    sa = make_addr(path);
  } catch (const Error&) {
    return false;
  }
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  return fd && ::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
}

}  // namespace nvproxy::shim
