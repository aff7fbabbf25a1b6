#include "common/ttrpc/client.h"

#include <sys/socket.h>
#include <sys/un.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <vector>

#include "common/ttrpc/frame.h"
#include "ttrpc.pb.h"

namespace nvproxy::ttrpc {

std::unique_ptr<Client> Client::connect(const std::string& path) {
  std::string p = path.starts_with("unix://") ? path.substr(7) : path;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (p.empty() || p.size() >= sizeof(addr.sun_path)) {
    throw Error(Code::InvalidArgument,
                "ttrpc address \"" + path + "\" is empty or longer than " + std::to_string(sizeof(addr.sun_path) - 1) + " bytes");
  }
  std::memcpy(addr.sun_path, p.data(), p.size());
  if (p[0] == '@') addr.sun_path[0] = '\0';
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) throw sys_error("ttrpc: socket for " + path);
  auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + p.size() + (p[0] == '@' ? 0 : 1));
  int rc;
  do {
    rc = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), len);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    throw Error(Code::Unavailable, "ttrpc: connect " + path + ": " + std::strerror(errno));
  }
  return std::unique_ptr<Client>(new Client(std::move(fd), path));
}

std::unique_ptr<Client> Client::adopt(UniqueFd connected, std::string peer) {
  if (!connected) throw Error(Code::InvalidArgument, "ttrpc: adopt() got no socket for " + peer);
  return std::unique_ptr<Client>(new Client(std::move(connected), std::move(peer)));
}

Client::Client(UniqueFd fd, std::string address) : address_(std::move(address)), fd_(std::move(fd)) {
  reader_ = std::thread([this] { reader_loop(); });
}

Client::~Client() {
  close();
  if (reader_.joinable()) reader_.join();
}

void Client::close() {
  {
    std::lock_guard lk(mu_);
    if (!broken_) fail_all_locked("client closed");
  }
  // Wakes the reader (recv returns 0) without closing the fd under its feet.
  ::shutdown(fd_.get(), SHUT_RDWR);
}

void Client::fail_all_locked(const std::string& why) {
  broken_ = why;
  for (auto& [_, p] : pending_) {
    p->done = true;
    p->code = Code::Unavailable;
    p->message = "ttrpc connection to " + address_ + ": " + why;
  }
  pending_.clear();
  cv_.notify_all();
}

void Client::reader_loop() {
  FrameParser parser;
  std::vector<char> buf(64 * 1024);
  std::vector<FrameParser::Event> events;
  std::string why;
  while (true) {
    ssize_t n = ::recv(fd_.get(), buf.data(), buf.size(), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      why = n == 0 ? (parser.idle() ? "closed by peer" : "closed by peer in the middle of a frame")
                   : std::string("read: ") + std::strerror(errno);
      break;
    }
    events.clear();
    parser.feed({buf.data(), static_cast<std::size_t>(n)}, events);
    std::lock_guard lk(mu_);
    for (auto& ev : events) {
      auto it = pending_.find(ev.header.stream_id);
      if (it == pending_.end()) continue;  // a call that timed out meanwhile
      Pending& p = *it->second;
      if (ev.kind == FrameParser::Event::Kind::Oversized) {
        p.code = Code::ResourceExhausted;
        p.message = "ttrpc response of " + std::to_string(ev.header.length) + " bytes exceeds the maximum message size of " +
                    std::to_string(kMaxMessageSize);
      } else if (ev.header.type != static_cast<std::uint8_t>(FrameType::Response)) {
        continue;  // not for a unary call; ignored like Go does
      } else {
        ::ttrpc::Response resp;
        if (!resp.ParseFromString(ev.payload)) {
          p.code = Code::Internal;
          p.message = "ttrpc: malformed response on stream " + std::to_string(ev.header.stream_id);
        } else if (resp.has_status() && resp.status().code() != 0) {
          int c = resp.status().code();
          p.code = c > 0 && c <= static_cast<int>(Code::Unauthenticated) ? static_cast<Code>(c) : Code::Unknown;
          p.message = resp.status().message();
          for (auto& d : *resp.mutable_status()->mutable_details()) {
            p.details.push_back({std::move(*d.mutable_type_url()), std::move(*d.mutable_value())});
          }
        } else {
          p.payload = std::move(*resp.mutable_payload());
        }
      }
      p.done = true;
      pending_.erase(it);
    }
    cv_.notify_all();
  }
  std::lock_guard lk(mu_);
  if (!broken_) fail_all_locked(why);
}

void Client::write_all(const std::string& frame) {
  const char* p = frame.data();
  std::size_t left = frame.size();
  while (left > 0) {
    ssize_t n = ::send(fd_.get(), p, left, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(Code::Unavailable, "ttrpc: write to " + address_ + ": " + std::strerror(errno));
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

std::string Client::call(const std::string& service, const std::string& method, const std::string& payload,
                         const Metadata& metadata, std::chrono::nanoseconds timeout) {
  const std::string what = service + "/" + method;
  ::ttrpc::Request req;
  req.set_service(service);
  req.set_method(method);
  req.set_payload(payload);
  if (timeout.count() > 0) req.set_timeout_nano(timeout.count());
  for (const auto& [k, v] : metadata) {
    auto* kv = req.add_metadata();
    kv->set_key(k);
    kv->set_value(v);
  }
  std::string body = req.SerializeAsString();
  if (body.size() > kMaxMessageSize) {
    throw Error(Code::ResourceExhausted, "ttrpc " + what + ": request of " + std::to_string(body.size()) +
                                             " bytes exceeds the maximum message size of " + std::to_string(kMaxMessageSize));
  }

  auto p = std::make_shared<Pending>();
  std::uint32_t id;
  {
    std::lock_guard lk(mu_);
    if (broken_) throw Error(Code::Unavailable, "ttrpc " + what + " to " + address_ + ": " + *broken_);
    id = next_id_;
    next_id_ += 2;  // client streams are odd; wraps past 2^32 back to odd ids
    pending_.emplace(id, p);
  }
  try {
    std::lock_guard wl(wmu_);
    write_all(encode_frame(id, FrameType::Request, body));
  } catch (const Error& e) {
    std::lock_guard lk(mu_);
    pending_.erase(id);
    throw Error(e.code(), "ttrpc " + what + ": " + e.what());
  }

  std::unique_lock lk(mu_);
  if (timeout.count() > 0) {
    if (!cv_.wait_for(lk, timeout, [&] { return p->done; })) {
      pending_.erase(id);
      throw Error(Code::DeadlineExceeded, "ttrpc " + what + " to " + address_ + ": no answer within " +
                                              std::to_string(timeout.count() / 1000000) + " ms");
    }
  } else {
    cv_.wait(lk, [&] { return p->done; });
  }
  if (p->code != Code::Ok) throw StatusError(p->code, p->message, std::move(p->details));
  return std::move(p->payload);
}

}  // namespace nvproxy::ttrpc
