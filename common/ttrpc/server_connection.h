// One accepted ttrpc connection of the server: reads frames, hands requests to the Server,
// writes responses one at a time. All its state lives on its strand.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/strand.hpp>

#include "common/error.h"
#include "common/ttrpc/frame.h"
#include "common/ttrpc/status_error.h"

namespace nvproxy::ttrpc {

class Server;

class ServerConnection : public std::enable_shared_from_this<ServerConnection> {
 public:
  using Strand = boost::asio::strand<boost::asio::io_context::executor_type>;

  ServerConnection(Server& server, Strand strand, int fd);

  void start();
  // Thread-safe: queue a response (status Ok when code is Ok) for stream_id.
  void send_response(std::uint32_t stream_id, Code code, const std::string& message, const std::string& payload,
                     const std::vector<StatusDetail>& details = {});
  // Thread-safe: close once queued responses are written (graceful shutdown).
  void close_after_flush();
  // Thread-safe: close now.
  void close();

 private:
  void read_more();
  void on_event(FrameParser::Event& ev);
  void enqueue(std::string frame);  // on strand
  void write_next();                // on strand
  void do_close();                  // on strand

  Server& server_;
  Strand strand_;
  boost::asio::local::stream_protocol::socket socket_;
  FrameParser parser_;
  std::array<char, 64 * 1024> rbuf_;
  std::deque<std::string> wqueue_;
  bool writing_ = false;
  bool close_when_flushed_ = false;
  bool closed_ = false;
};

}  // namespace nvproxy::ttrpc
