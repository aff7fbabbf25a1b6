// ttrpc server on Boost.Asio, wire-compatible with containerd's ttrpc (unary calls).
//
// Threading: run(n) drives socket I/O on n threads (one is plenty). Each request runs on a
// WorkerPool thread so a handler may block (Wait, Checkpoint) while other requests on the same
// or other connections proceed; a connection writes its responses one at a time on its strand.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include "common/log.h"
#include "common/ttrpc/call_context.h"
#include "common/ttrpc/status_error.h"
#include "common/ttrpc/worker_pool.h"
#include "common/unique_fd.h"

namespace nvproxy::ttrpc {

// Returns the response payload. Throw nvproxy::Error to answer a status with its code and
// message (a StatusError adds its details); any other exception answers Unknown.
using Handler = std::function<std::string(const CallContext&, const std::string& request_payload)>;

struct ServerOptions {
  std::chrono::milliseconds shutdown_grace{10000};  // how long shutdown() waits for handlers
  std::size_t max_idle_workers = 4;
  // Like containerd's shims (UnixSocketRequireSameUser): only a peer running as our effective
  // uid may talk to us; others are disconnected at accept.
  bool require_same_user = true;
  // A server with no listener (serve_connection only, e.g. a helper on a socketpair) shuts down
  // once its last connection has closed: its peer is gone.
  bool stop_when_disconnected = false;
};

class ServerConnection;

class Server {
 public:
  explicit Server(Logger& log, ServerOptions opts = {});
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  // Joins handler threads (it waits for handlers still running after the grace period).
  ~Server();

  // Register before run(); a later registration is safe but races with incoming calls.
  void register_method(std::string service, std::string method, Handler handler);

  // Accepts connections on an already listening unix socket (the shim creates and binds it).
  void serve(UniqueFd listening_socket);
  // Serves one already connected socket (one end of a socketpair whose other end is the client's).
  void serve_connection(UniqueFd connected);
  // Creates, binds (mode 0600) and listens on a unix socket at path; removes a stale file.
  void listen(const std::string& path);

  // Runs until shutdown() has completed. Call once.
  void run(unsigned io_threads = 1);

  // Stops accepting, answers new requests Unavailable, lets in-flight handlers finish (up to
  // shutdown_grace) and their responses flush, closes every connection and makes run() return.
  // Never blocks, so a handler (the Shutdown RPC) may call it; its own response is still sent.
  void shutdown();

  [[nodiscard]] std::size_t connection_count() const;

 private:
  friend class ServerConnection;
  using Executor = boost::asio::io_context::executor_type;
  struct Listener {
    explicit Listener(boost::asio::io_context& io) : strand(boost::asio::make_strand(io)), acceptor(strand) {}
    boost::asio::strand<Executor> strand;
    boost::asio::local::stream_protocol::acceptor acceptor;
  };

  void add_listener(UniqueFd fd);
  void start_accept(const std::shared_ptr<Listener>& l);
  void accept_ready(const std::shared_ptr<Listener>& l);

  // Called by connections (on their strand).
  void dispatch(const std::shared_ptr<ServerConnection>& conn, std::uint32_t stream_id, CallContext ctx, std::string payload);
  void connection_closed(const ServerConnection* conn);

  void request_done();
  void grace_expired();
  void finish_locked();  // close everything and let run() return; mu_ held

  Logger& log_;
  const ServerOptions opts_;
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<Executor> work_;
  boost::asio::steady_timer grace_timer_;

  mutable std::mutex mu_;
  std::map<std::string, std::map<std::string, Handler, std::less<>>, std::less<>> methods_;  // service → method
  std::vector<std::shared_ptr<Listener>> listeners_;
  std::map<const ServerConnection*, std::shared_ptr<ServerConnection>> connections_;
  std::size_t in_flight_ = 0;
  bool shutting_down_ = false;
  bool finished_ = false;

  WorkerPool pool_;  // declared last: destroyed (joined) first, while io_ still exists
};

}  // namespace nvproxy::ttrpc
