#include "checkpoint/registry/http_connection.h"

#include <openssl/ssl.h>

#include <algorithm>
#include <array>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cctype>
#include <filesystem>
#include <limits>
#include <optional>

#include "common/error.h"

namespace nvproxy::checkpoint {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::size_t kPiece = 1 << 20;
constexpr std::size_t kMaxTextBody = 4 << 20;

http::verb verb_of(Method m) {
  switch (m) {
    case Method::Get: return http::verb::get;
    case Method::Head: return http::verb::head;
    case Method::Post: return http::verb::post;
    case Method::Put: return http::verb::put;
    case Method::Delete: return http::verb::delete_;
  }
  return http::verb::get;
}

// Where a statically linked program finds the system's CA bundle: OpenSSL's compiled-in directory
// is Debian's, so RHEL's and SUSE's bundles are named too.
void load_trust(ssl::context& ctx) {
  ctx.set_default_verify_paths();
  for (const char* f : {"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/ca-bundle.pem",
                        "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem"}) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(f, ec)) {
      beast::error_code bec;
      ctx.load_verify_file(f, bec);
      if (!bec) break;
    }
  }
}

}  // namespace

std::string HttpEndpoint::authority() const {
  if ((tls && port == "443") || (!tls && port == "80")) return host;
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + port;
}

std::string HttpEndpoint::url(const std::string& target) const {
  return std::string(tls ? "https://" : "http://") + authority() + target;
}

std::pair<HttpEndpoint, std::string> parse_url(const std::string& url, bool verify) {
  HttpEndpoint ep;
  ep.verify = verify;
  std::string rest;
  if (url.rfind("https://", 0) == 0) {
    rest = url.substr(8);
  } else if (url.rfind("http://", 0) == 0) {
    ep.tls = false;
    rest = url.substr(7);
  } else {
    throw Error(Code::InvalidArgument, "\"" + url + "\" is not an http(s) URL");
  }
  const auto slash = rest.find('/');
  std::string auth = rest.substr(0, slash), target = slash == std::string::npos ? "/" : rest.substr(slash);
  ep.port = ep.tls ? "443" : "80";
  if (!auth.empty() && auth.front() == '[') {  // [v6]:port
    auto close = auth.find(']');
    if (close == std::string::npos) throw Error(Code::InvalidArgument, "\"" + url + "\" has a bad address");
    ep.host = auth.substr(1, close - 1);
    if (close + 1 < auth.size() && auth[close + 1] == ':') ep.port = auth.substr(close + 2);
  } else if (auto colon = auth.rfind(':'); colon != std::string::npos) {
    ep.host = auth.substr(0, colon);
    ep.port = auth.substr(colon + 1);
  } else {
    ep.host = auth;
  }
  if (ep.host.empty() || ep.port.empty() ||
      !std::all_of(ep.port.begin(), ep.port.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
    throw Error(Code::InvalidArgument, "\"" + url + "\" names no host and port");
  return {ep, target};
}

std::string HttpResponse::header(const std::string& lower_name) const {
  auto it = headers.find(lower_name);
  return it == headers.end() ? std::string() : it->second;
}

struct HttpConnection::Impl {
  HttpEndpoint ep;
  std::chrono::seconds io_timeout;
  asio::io_context ioc;
  std::optional<ssl::context> ctx;
  std::optional<beast::tcp_stream> plain;
  std::optional<beast::ssl_stream<beast::tcp_stream>> secure;
  beast::flat_buffer buffer;
  bool connected = false;
  bool keep = false;
  int exchanges = 0;  // on this connection since it was opened

  Impl(HttpEndpoint e, std::chrono::seconds t) : ep(std::move(e)), io_timeout(t) {}

  beast::tcp_stream& lowest() { return secure ? beast::get_lowest_layer(*secure) : *plain; }

  // Runs one asynchronous step to its end. A step the stream's own expiry does not cover (the
  // name's resolution) is bounded by `limit` here.
  template <class Start>
  beast::error_code wait(Start&& start, std::chrono::steady_clock::duration limit) {
    std::optional<beast::error_code> result;
    start([&result](beast::error_code ec, auto&&...) { result = ec; });
    ioc.restart();
    ioc.run_for(limit);
    if (!result) {
      ioc.stop();
      close();
      ioc.restart();
      ioc.run();  // the cancelled step ends
      return beast::error::timeout;
    }
    return *result;
  }
  std::chrono::steady_clock::duration step(Clock::time_point deadline) const {
    auto left = deadline - Clock::now();
    return std::max<Clock::duration>(std::chrono::milliseconds(1), std::min<Clock::duration>(left, io_timeout));
  }

  void close() {
    beast::error_code ignored;
    if (secure) beast::get_lowest_layer(*secure).socket().close(ignored);
    if (plain) plain->socket().close(ignored);
    connected = false;
  }

  [[noreturn]] void fail(const std::string& what, beast::error_code ec) {
    close();
    if (ec == beast::error::timeout)
      throw Error(Code::DeadlineExceeded,
                  what + " " + ep.url("") + ": no answer within " + std::to_string(io_timeout.count()) + " s");
    throw Error(Code::Unavailable, what + " " + ep.url("") + ": " + ec.message());
  }

  void open(Clock::time_point deadline) {
    if (connected) return;
    plain.reset();
    secure.reset();
    buffer.clear();
    // Beast reads at most the buffer's free capacity (at least 512 bytes) per call, and a body
    // parsed into buffer_body never grows it: without room, a blob arrives 512 bytes a syscall.
    buffer.reserve(kPiece);
    tcp::resolver resolver(ioc);
    tcp::resolver::results_type found;
    beast::error_code ec = wait(
        [&](auto done) {
          resolver.async_resolve(ep.host, ep.port, [&found, done](beast::error_code e, tcp::resolver::results_type r) {
            found = std::move(r);
            done(e);
          });
        },
        step(deadline));
    if (ec) fail("resolving", ec);
    if (ep.tls) {
      if (!ctx) {
        ctx.emplace(ssl::context::tls_client);
        if (ep.verify) load_trust(*ctx);
      }
      secure.emplace(ioc, *ctx);
      if (!SSL_set_tlsext_host_name(secure->native_handle(), ep.host.c_str()))
        fail("naming the server to", beast::error_code(static_cast<int>(::ERR_get_error()), asio::error::get_ssl_category()));
      if (ep.verify) {
        secure->set_verify_mode(ssl::verify_peer);
        secure->set_verify_callback(ssl::host_name_verification(ep.host));
      } else {
        secure->set_verify_mode(ssl::verify_none);
      }
    } else {
      plain.emplace(ioc);
    }
    lowest().expires_after(step(deadline));
    ec = wait([&](auto done) { lowest().async_connect(found, [done](beast::error_code e, const tcp::endpoint&) { done(e); }); },
              step(deadline) + std::chrono::seconds(1));
    if (ec) fail("connecting to", ec);
    if (secure) {
      lowest().expires_after(step(deadline));
      ec = wait([&](auto done) { secure->async_handshake(ssl::stream_base::client, done); },
                step(deadline) + std::chrono::seconds(1));
      if (ec) fail("the TLS handshake with", ec);
    }
    connected = true;
    exchanges = 0;
  }

  template <class Stream>
  HttpResponse exchange_on(Stream& s, const HttpRequest& req, const ImageRegistry::Writer* sink, Clock::time_point deadline,
                           bool& sent_nothing) {
    const std::string what = std::string(http::to_string(verb_of(req.method))) + " " + req.target + " on";
    auto op = [&](auto&& start) {
      if (Clock::now() >= deadline) fail(what, beast::error::timeout);
      lowest().expires_after(step(deadline));
      return wait(start, step(deadline) + std::chrono::seconds(1));
    };
    http::request<http::buffer_body> r{verb_of(req.method), req.target, 11};
    r.set(http::field::host, ep.authority());
    r.set(http::field::user_agent, "containerd-shim-nvproxy");
    for (const auto& [k, v] : req.headers) r.set(k, v);
    const bool has_body = req.body != nullptr || !req.text.empty() || req.method == Method::Post || req.method == Method::Put;
    const std::uint64_t size = req.body ? req.body_size : req.text.size();
    if (has_body) r.content_length(size);
    r.body().data = nullptr;
    r.body().size = 0;
    r.body().more = size > 0;
    http::request_serializer<http::buffer_body> sr{r};
    beast::error_code ec = op([&](auto done) { http::async_write_header(s, sr, done); });
    if (ec) fail(what, ec);
    std::vector<char> piece(size > 0 ? std::min<std::uint64_t>(size, kPiece) : 0);
    std::uint64_t at = 0;
    while (at < size) {
      std::size_t n = 0;
      if (req.body) {
        n = (*req.body)(at, piece.data(), std::min<std::uint64_t>(piece.size(), size - at));
      } else {
        n = std::min<std::uint64_t>(piece.size(), size - at);
        std::copy_n(req.text.data() + at, n, piece.data());
      }
      if (n == 0)
        throw Error(Code::DataLoss, what + " " + ep.url("") + ": the body ended at " + std::to_string(at) + " of " +
                                        std::to_string(size) + " bytes");
      r.body().data = piece.data();
      r.body().size = n;
      r.body().more = at + n < size;
      ec = op([&](auto done) { http::async_write(s, sr, done); });
      if (ec == http::error::need_buffer) ec = {};
      if (ec) fail(what, ec);
      at += n;
    }
    if (!sr.is_done()) {
      r.body().data = nullptr;
      r.body().more = false;
      ec = op([&](auto done) { http::async_write(s, sr, done); });
      if (ec == http::error::need_buffer) ec = {};
      if (ec) fail(what, ec);
    }
    sent_nothing = false;

    http::response_parser<http::buffer_body> p;
    p.body_limit(std::numeric_limits<std::uint64_t>::max());
    if (req.method == Method::Head) p.skip(true);
    ec = op([&](auto done) { http::async_read_header(s, buffer, p, done); });
    if (ec) {
      if (exchanges > 0 && (ec == http::error::end_of_stream || ec == asio::error::connection_reset)) sent_nothing = true;
      fail(what, ec);
    }
    HttpResponse out;
    out.status = static_cast<int>(p.get().result_int());
    for (const auto& f : p.get()) {
      std::string name(f.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      out.headers[name] = std::string(f.value());
    }
    const bool stream = sink != nullptr && out.status / 100 == 2;
    std::vector<char> in(kPiece);
    std::uint64_t got = 0;
    while (!p.is_done()) {
      p.get().body().data = in.data();
      p.get().body().size = in.size();
      ec = op([&](auto done) { http::async_read(s, buffer, p, done); });
      if (ec == http::error::need_buffer) ec = {};
      if (ec) fail(what, ec);
      const std::size_t n = in.size() - p.get().body().size;
      if (stream) {
        (*sink)(got, in.data(), n);
      } else {
        if (out.body.size() + n > kMaxTextBody) fail(what, http::error::body_limit);
        out.body.append(in.data(), n);
      }
      got += n;
    }
    keep = p.get().keep_alive();
    ++exchanges;
    if (!keep) close();
    return out;
  }
};

HttpConnection::HttpConnection(HttpEndpoint ep, std::chrono::seconds io_timeout)
    : impl_(std::make_unique<Impl>(std::move(ep), io_timeout)) {}
HttpConnection::~HttpConnection() {
  impl_->close();
}

void HttpConnection::open(Clock::time_point deadline) {
  impl_->open(deadline);
}

HttpResponse HttpConnection::exchange(const HttpRequest& req, const ImageRegistry::Writer* sink, Clock::time_point deadline) {
  for (int attempt = 0;; ++attempt) {
    impl_->open(deadline);
    bool sent_nothing = true;
    try {
      if (impl_->secure) return impl_->exchange_on(*impl_->secure, req, sink, deadline, sent_nothing);
      return impl_->exchange_on(*impl_->plain, req, sink, deadline, sent_nothing);
    } catch (const Error&) {
      // A kept-alive connection the server closed meanwhile: once more on a new one.
      if (attempt > 0 || !sent_nothing) throw;
    }
  }
}

bool HttpConnection::reusable() const {
  return impl_->connected && impl_->keep;
}

const HttpEndpoint& HttpConnection::endpoint() const {
  return impl_->ep;
}

}  // namespace nvproxy::checkpoint
