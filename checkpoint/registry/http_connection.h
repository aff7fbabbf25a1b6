// One HTTP/1.1 connection to a registry (Boost.Beast over Asio; TLS through OpenSSL), kept alive
// between exchanges. Bodies stream both ways in 1 MiB pieces, so a 1 GiB blob never sits in
// memory. Every network step has a deadline (io_timeout without progress) and the whole exchange
// one more (deadline): an expiry is Error(DeadlineExceeded), the connection closed.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/registry/image_registry.h"

namespace nvproxy::checkpoint {

struct HttpEndpoint {
  std::string host;  // name or address, without the port
  std::string port;
  bool tls = true;
  bool verify = true;                           // the server's certificate and name checked
  [[nodiscard]] std::string authority() const;  // "host:port" (the port left out where it is the scheme's)
  [[nodiscard]] std::string url(const std::string& target) const;
};

// "https://host:5000/path?q" -> its endpoint and "/path?q"; `verify` carried over. Error naming it
// when it is no http(s) URL.
std::pair<HttpEndpoint, std::string> parse_url(const std::string& url, bool verify);

enum class Method { Get, Head, Post, Put, Delete };

struct HttpRequest {
  Method method = Method::Get;
  std::string target;  // "/v2/..."
  std::vector<std::pair<std::string, std::string>> headers;
  std::string text;                             // a small body (a manifest)
  const ImageRegistry::Reader* body = nullptr;  // or a streamed one of body_size bytes
  std::uint64_t body_size = 0;
};

struct HttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;                            // unless it went to the sink (at most 4 MiB)
  [[nodiscard]] std::string header(const std::string& lower_name) const;
};

class HttpConnection {
 public:
  HttpConnection(HttpEndpoint ep, std::chrono::seconds io_timeout);
  ~HttpConnection();
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  // Connects (TLS handshake included) unless connected. Error(Unavailable) with the cause.
  void open(std::chrono::steady_clock::time_point deadline);
  // One request and its answer; a 2xx answer's body goes to `sink` when one is given. A connection
  // the server closed since the last exchange is opened again once.
  HttpResponse exchange(const HttpRequest& req, const ImageRegistry::Writer* sink,
                        std::chrono::steady_clock::time_point deadline);
  [[nodiscard]] bool reusable() const;
  [[nodiscard]] const HttpEndpoint& endpoint() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nvproxy::checkpoint
