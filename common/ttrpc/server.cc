#include "common/ttrpc/server.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cxxabi.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <thread>

#include <boost/asio/post.hpp>

#include "common/error.h"
#include "common/ttrpc/server_connection.h"

namespace nvproxy::ttrpc {

namespace {

// The (demangled) type of the exception being handled: what a handler threw that is not an
// std::exception, so that the error says what to look for.
std::string current_exception_type() {
  const std::type_info* t = abi::__cxa_current_exception_type();
  if (!t) return "unknown";
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> name(abi::__cxa_demangle(t->name(), nullptr, nullptr, &status), &std::free);
  return status == 0 && name ? name.get() : t->name();
}

}  // namespace

namespace asio = boost::asio;

Server::Server(Logger& log, ServerOptions opts)
    : log_(log), opts_(opts), work_(asio::make_work_guard(io_)), grace_timer_(io_), pool_(opts.max_idle_workers) {}

Server::~Server() {
  shutdown();
  pool_.join();  // handlers hold connections; they must be gone before io_ is
  {
    std::lock_guard lk(mu_);
    connections_.clear();
    listeners_.clear();
  }
}

void Server::register_method(std::string service, std::string method, Handler handler) {
  std::lock_guard lk(mu_);
  methods_[std::move(service)][std::move(method)] = std::move(handler);
}

void Server::listen(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    throw Error(Code::InvalidArgument, "ttrpc socket path \"" + path + "\" is empty or longer than " +
                                           std::to_string(sizeof(addr.sun_path) - 1) + " bytes");
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) throw sys_error("ttrpc: socket for " + path);
  ::unlink(path.c_str());  // a stale socket of a previous run would make bind fail
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    throw sys_error("ttrpc: bind " + path);
  }
  if (::chmod(path.c_str(), 0600) != 0) throw sys_error("ttrpc: chmod 0600 " + path);
  if (::listen(fd.get(), SOMAXCONN) != 0) throw sys_error("ttrpc: listen " + path);
  serve(std::move(fd));
}

void Server::serve(UniqueFd listening_socket) {
  if (!listening_socket) throw Error(Code::InvalidArgument, "ttrpc: serve() got no socket");
  auto l = std::make_shared<Listener>(io_);
  boost::system::error_code ec;
  l->acceptor.assign(asio::local::stream_protocol(), listening_socket.get(), ec);
  if (ec) {
    throw Error(Code::Internal,
                "ttrpc: adopting listening socket fd " + std::to_string(listening_socket.get()) + ": " + ec.message());
  }
  listening_socket.release();
  {
    std::lock_guard lk(mu_);
    if (shutting_down_) return;  // l closes its socket on destruction
    listeners_.push_back(l);
  }
  start_accept(l);
}

void Server::serve_connection(UniqueFd connected) {
  if (!connected) throw Error(Code::InvalidArgument, "ttrpc: serve_connection() got no socket");
  std::shared_ptr<ServerConnection> conn;
  {
    std::lock_guard lk(mu_);
    if (shutting_down_) return;  // connected closes on return
    conn = std::make_shared<ServerConnection>(*this, asio::make_strand(io_), connected.get());
    connected.release();
    connections_.emplace(conn.get(), conn);
  }
  conn->start();
}

void Server::start_accept(const std::shared_ptr<Listener>& l) {
  asio::post(l->strand, [this, l] {
    // Wait for readability and accept ourselves: accept4 sets CLOEXEC atomically, so no fd of
    // a client leaks into the runtime processes the shim forks meanwhile.
    l->acceptor.async_wait(asio::socket_base::wait_read, [this, l](boost::system::error_code ec) {
      if (ec) return;  // closed by shutdown()
      accept_ready(l);
    });
  });
}

void Server::accept_ready(const std::shared_ptr<Listener>& l) {
  int fd = ::accept4(l->acceptor.native_handle(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) {
    int err = errno;
    if (err != EAGAIN && err != EINTR && err != ECONNABORTED) {
      log_.error(std::string("ttrpc: accept: ") + std::strerror(err));
      if (err == EMFILE || err == ENFILE) {
        // Out of fds: back off instead of spinning on a socket that stays readable.
        auto t = std::make_shared<asio::steady_timer>(l->strand, std::chrono::milliseconds(100));
        t->async_wait([this, l, t](boost::system::error_code) { start_accept(l); });
        return;
      }
    }
    start_accept(l);
    return;
  }
  if (opts_.require_same_user) {
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.uid != ::geteuid()) {
      log_.warn("ttrpc: refusing connection from pid " + std::to_string(cred.pid) + " uid " + std::to_string(cred.uid) +
                ": not the shim's user");
      ::close(fd);
      start_accept(l);
      return;
    }
  }
  std::shared_ptr<ServerConnection> conn;
  {
    std::lock_guard lk(mu_);
    if (shutting_down_) {
      ::close(fd);
      return;
    }
    conn = std::make_shared<ServerConnection>(*this, asio::make_strand(io_), fd);
    connections_.emplace(conn.get(), conn);
  }
  conn->start();
  start_accept(l);
}

void Server::dispatch(const std::shared_ptr<ServerConnection>& conn, std::uint32_t stream_id, CallContext ctx,
                      std::string payload) {
  Handler handler;
  {
    std::lock_guard lk(mu_);
    if (shutting_down_) {
      conn->send_response(stream_id, Code::Unavailable, "ttrpc: server shutting down", {});
      return;
    }
    auto s = methods_.find(ctx.service);
    if (s == methods_.end()) {
      conn->send_response(stream_id, Code::Unimplemented, "service " + ctx.service, {});
      return;
    }
    auto m = s->second.find(ctx.method);
    if (m == s->second.end()) {
      conn->send_response(stream_id, Code::Unimplemented, "method " + ctx.method, {});
      return;
    }
    handler = m->second;
    ++in_flight_;
  }
  pool_.submit([this, conn, stream_id, ctx = std::move(ctx), payload = std::move(payload), handler = std::move(handler)] {
    Code code = Code::Ok;
    std::string message;
    std::string out;
    std::vector<StatusDetail> details;
    const auto started = std::chrono::steady_clock::now();
    try {
      out = handler(ctx, payload);
    } catch (const StatusError& e) {
      code = e.code();
      message = e.what();
      details = e.details();
    } catch (const Error& e) {
      code = e.code();
      message = e.what();
    } catch (const std::exception&) {
      // What the standard library threw gets a code and names the call, never Unknown.
      const Error e = error_from_current_exception(ctx.service + "/" + ctx.method);
      code = e.code();
      message = e.what();
    } catch (...) {
      code = Code::Unknown;
      message = "non-standard exception of type " + current_exception_type();
    }
    if (code != Code::Ok) {
      // How long the handler took before it failed: what a hostile input cost the shim itself.
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count();
      log_.debug("ttrpc: " + ctx.service + "/" + ctx.method + " failed after " + std::to_string(ms) +
                 " ms: " + std::string(code_name(code)) + ": " + message);
    }
    try {
      conn->send_response(stream_id, code, code == Code::Ok ? message : status_message(message), out, details);
    } catch (const std::exception& e) {
      log_.error("ttrpc: answering " + ctx.service + "/" + ctx.method + ": " + e.what());
    }
    request_done();
  });
}

void Server::request_done() {
  std::lock_guard lk(mu_);
  --in_flight_;
  if (shutting_down_ && in_flight_ == 0) finish_locked();
}

void Server::connection_closed(const ServerConnection* conn) {
  bool last = false;
  {
    std::lock_guard lk(mu_);
    connections_.erase(conn);
    if (finished_ && connections_.empty()) {
      asio::post(io_, [this] { grace_timer_.cancel(); });  // nothing left to force-close
    }
    last = opts_.stop_when_disconnected && connections_.empty() && listeners_.empty();
  }
  if (last) shutdown();
}

std::size_t Server::connection_count() const {
  std::lock_guard lk(mu_);
  return connections_.size();
}

void Server::shutdown() {
  std::lock_guard lk(mu_);
  if (shutting_down_) return;
  shutting_down_ = true;
  for (auto& l : listeners_) {
    asio::post(l->strand, [l] {
      boost::system::error_code ignored;
      l->acceptor.close(ignored);
    });
  }
  // Bounds both waits: for handlers to return and for their answers to be written.
  grace_timer_.expires_after(opts_.shutdown_grace);
  grace_timer_.async_wait([this](boost::system::error_code ec) {
    if (!ec) grace_expired();
  });
  if (in_flight_ == 0) finish_locked();
}

void Server::grace_expired() {
  std::lock_guard lk(mu_);
  if (!finished_) {
    log_.warn("ttrpc: " + std::to_string(in_flight_) +
              " handlers still running after the shutdown grace period; closing connections");
    finish_locked();
  }
  for (auto& [_, c] : connections_) c->close();  // peers that do not read lose their answers
}

void Server::finish_locked() {
  if (finished_) return;
  finished_ = true;
  // Each connection writes what its handlers already answered, then closes.
  for (auto& [_, c] : connections_) c->close_after_flush();
  if (connections_.empty()) asio::post(io_, [this] { grace_timer_.cancel(); });
  // run() returns once the connections' last writes and closes (and the timer) are done.
  asio::post(io_, [this] { work_.reset(); });
}

void Server::run(unsigned io_threads) {
  std::vector<std::thread> extra;
  for (unsigned i = 1; i < io_threads; ++i) extra.emplace_back([this] { io_.run(); });
  io_.run();
  for (auto& t : extra) t.join();
}

}  // namespace nvproxy::ttrpc
