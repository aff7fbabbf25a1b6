#include "common/ttrpc/server_connection.h"

#include <algorithm>

#include <boost/asio/buffer.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

#include "common/text.h"
#include "common/ttrpc/server.h"
#include "ttrpc.pb.h"

namespace nvproxy::ttrpc {

namespace asio = boost::asio;

ServerConnection::ServerConnection(Server& server, Strand strand, int fd)
    : server_(server), strand_(std::move(strand)), socket_(strand_) {
  socket_.assign(asio::local::stream_protocol(), fd);
}

void ServerConnection::start() {
  asio::post(strand_, [self = shared_from_this()] { self->read_more(); });
}

void ServerConnection::read_more() {
  if (closed_) return;
  socket_.async_read_some(asio::buffer(rbuf_), [self = shared_from_this()](boost::system::error_code ec, std::size_t n) {
    if (ec) {
      if (ec != asio::error::operation_aborted && !self->parser_.idle()) {
        self->server_.log_.warn("ttrpc: connection closed in the middle of a frame (" + ec.message() + "); dropping it");
      }
      self->do_close();
      return;
    }
    std::vector<FrameParser::Event> events;
    self->parser_.feed({self->rbuf_.data(), n}, events);
    for (auto& ev : events) self->on_event(ev);
    self->read_more();
  });
}

void ServerConnection::on_event(FrameParser::Event& ev) {
  const auto sid = ev.header.stream_id;
  if (ev.kind == FrameParser::Event::Kind::Oversized) {
    send_response(sid, Code::ResourceExhausted,
                  "message length " + std::to_string(ev.header.length) + " exceed maximum message size of " +
                      std::to_string(kMaxMessageSize),
                  {});
    return;
  }
  // Responses and data frames from a client have no meaning for unary calls; Go ignores
  // unknown types for forward compatibility, and so do we.
  if (ev.header.type != static_cast<std::uint8_t>(FrameType::Request)) return;

  ::ttrpc::Request req;
  if (!req.ParseFromString(ev.payload)) {
    send_response(sid, Code::InvalidArgument, "unmarshal request error on stream " + std::to_string(sid), {});
    return;
  }
  if (sid % 2 != 1) {
    send_response(sid, Code::InvalidArgument, "StreamID must be odd for client initiated streams", {});
    return;
  }
  CallContext ctx;
  ctx.service = std::move(*req.mutable_service());
  ctx.method = std::move(*req.mutable_method());
  ctx.stream_id = sid;
  for (auto& kv : *req.mutable_metadata()) {
    ctx.metadata.emplace(std::move(*kv.mutable_key()), std::move(*kv.mutable_value()));
  }
  if (req.timeout_nano() > 0) {
    ctx.timeout = std::chrono::nanoseconds(req.timeout_nano());
    // Capped: a timeout near INT64_MAX ns would overflow the addition (UB; found by fuzz_ttrpc_server).
    ctx.deadline =
        std::chrono::steady_clock::now() + std::min<std::chrono::nanoseconds>(*ctx.timeout, std::chrono::hours(24 * 365 * 100));
  }
  server_.dispatch(shared_from_this(), sid, std::move(ctx), std::move(*req.mutable_payload()));
}

void ServerConnection::send_response(std::uint32_t stream_id, Code code, const std::string& message, const std::string& payload,
                                     const std::vector<StatusDetail>& details) {
  ::ttrpc::Response resp;
  // Go always sets status (code 0 on success); mirror it so any client version is satisfied.
  resp.mutable_status()->set_code(static_cast<int>(code));
  // The one place a status is built: proto3 refuses a string that is not UTF-8 (containerd would
  // say only "proto: field .message contains invalid UTF-8"), so bytes that are not are escaped here.
  resp.mutable_status()->set_message(valid_utf8(message));
  for (const auto& d : details) {
    auto* any = resp.mutable_status()->add_details();
    any->set_type_url(d.type_url);
    any->set_value(d.value);
  }
  if (code == Code::Ok) resp.set_payload(payload);
  std::string body = resp.SerializeAsString();
  if (body.size() > kMaxMessageSize) {
    resp.Clear();
    resp.mutable_status()->set_code(static_cast<int>(Code::ResourceExhausted));
    resp.mutable_status()->set_message("response of " + std::to_string(body.size()) +
                                       " bytes exceeds the maximum message size of " + std::to_string(kMaxMessageSize));
    body = resp.SerializeAsString();
  }
  std::string frame = encode_frame(stream_id, FrameType::Response, body);
  asio::post(strand_, [self = shared_from_this(), f = std::move(frame)]() mutable { self->enqueue(std::move(f)); });
}

void ServerConnection::enqueue(std::string frame) {
  if (closed_) return;  // the client left; its answer has nowhere to go
  wqueue_.push_back(std::move(frame));
  if (!writing_) write_next();
}

void ServerConnection::write_next() {
  if (wqueue_.empty()) {
    writing_ = false;
    if (close_when_flushed_) do_close();
    return;
  }
  writing_ = true;
  asio::async_write(socket_, asio::buffer(wqueue_.front()),
                    [self = shared_from_this()](boost::system::error_code ec, std::size_t) {
                      if (ec) {
                        if (ec != asio::error::operation_aborted) {
                          self->server_.log_.debug("ttrpc: write failed: " + ec.message());
                        }
                        self->do_close();
                        return;
                      }
                      self->wqueue_.pop_front();
                      self->write_next();
                    });
}

void ServerConnection::close_after_flush() {
  asio::post(strand_, [self = shared_from_this()] {
    self->close_when_flushed_ = true;
    if (!self->writing_) self->do_close();
  });
}

void ServerConnection::close() {
  asio::post(strand_, [self = shared_from_this()] { self->do_close(); });
}

void ServerConnection::do_close() {
  if (closed_) return;
  closed_ = true;
  boost::system::error_code ignored;
  socket_.shutdown(asio::socket_base::shutdown_both, ignored);
  socket_.close(ignored);
  server_.connection_closed(this);
}

}  // namespace nvproxy::ttrpc
