#include "shim/task/binary_io.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <thread>

#include "common/error.h"
#include "common/fs.h"
#include "common/number.h"
#include "common/process.h"

namespace nvproxy::shim {

namespace {

// How long the binary may take to say it is ready, and to finish after EOF + SIGTERM (containerd's
// runc shim waits 12 s before it kills the logger).
constexpr int kReadyTimeoutMs = 30000;

std::string percent_decode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
               std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(parse_number<int>(std::string_view(s).substr(i + 1, 2), 16).value_or('?'));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

BinaryUri parse_binary_uri(const std::string& uri) {
  const std::string scheme = "binary://";
  if (uri.rfind(scheme, 0) != 0) throw Error(Code::InvalidArgument, "\"" + uri + "\" is not a binary:// URI");
  std::string rest = uri.substr(scheme.size());
  BinaryUri b;
  auto q = rest.find('?');
  b.path = percent_decode(rest.substr(0, q));
  if (b.path.empty() || b.path.front() != '/')
    throw Error(Code::InvalidArgument, "logging binary URI \"" + uri + "\" does not name an absolute path");
  if (q == std::string::npos) return b;
  std::string query = rest.substr(q + 1);
  size_t start = 0;
  while (start <= query.size()) {
    size_t amp = query.find('&', start);
    std::string kv = query.substr(start, amp == std::string::npos ? std::string::npos : amp - start);
    if (!kv.empty()) {
      auto eq = kv.find('=');
      b.args.push_back(percent_decode(kv.substr(0, eq)));
      if (eq != std::string::npos) b.args.push_back(percent_decode(kv.substr(eq + 1)));
    }
    if (amp == std::string::npos) break;
    start = amp + 1;
  }
  return b;
}

BinaryIO::BinaryIO(const std::string& uri, const IoOwner& owner) {
  if (!owner.runner) throw Error(Code::Internal, "binary log " + uri + ": no process runner");
  BinaryUri b = parse_binary_uri(uri);
  null_in_ = open_devnull(O_RDONLY);
  UniqueFd out_r, err_r, ready_r, ready_w;
  make_pipe(out_r, out_w_, "a logging binary");
  make_pipe(err_r, err_w_, "a logging binary");
  make_pipe(ready_r, ready_w, "a logging binary");
  Command cmd{.argv = {b.path},
              .env_add = {"CONTAINER_ID=" + owner.container_id, "CONTAINER_NAMESPACE=" + owner.ns},
              .extra_fds = {out_r.get(), err_r.get(), ready_w.get()}};
  cmd.argv.insert(cmd.argv.end(), b.args.begin(), b.args.end());
  pid_ = owner.runner->start(cmd);
  // Reaped by the runner's waiter; the thread lets wait_output wait with a deadline.
  std::thread([runner = owner.runner, pid = pid_, e = exit_] {
    runner->wait(pid);
    std::lock_guard lk(e->mu);
    e->done = true;
    e->cv.notify_all();
  }).detach();
  ready_w.reset();
  pollfd p{ready_r.get(), POLLIN, 0};
  int n;
  while ((n = ::poll(&p, 1, kReadyTimeoutMs)) < 0 && errno == EINTR) {
  }
  if (n == 0) {
    ::kill(pid_, SIGKILL);
    throw Error(Code::DeadlineExceeded, "logging binary " + b.path + " (pid " + std::to_string(pid_) +
                                            ") did not get ready within " + std::to_string(kReadyTimeoutMs / 1000) + " s");
  }
}

BinaryIO::~BinaryIO() {
  if (!finished_) wait_output(std::chrono::milliseconds(0));
}

oci::Stdio BinaryIO::child_stdio() const {
  return {null_in_.get(), out_w_.get(), err_w_.get()};
}

bool BinaryIO::wait_output(std::chrono::milliseconds timeout) {
  finished_ = true;
  out_w_.reset();
  err_w_.reset();
  std::unique_lock lk(exit_->mu);
  if (exit_->done) return true;
  ::kill(pid_, SIGTERM);
  if (exit_->cv.wait_for(lk, timeout, [&] { return exit_->done; })) return true;
  ::kill(pid_, SIGKILL);
  return false;
}

}  // namespace nvproxy::shim
