// ImageRegistry over the OCI distribution API, spoken here (http_connection.h): manifests by tag or
// digest, blobs checked for before they are sent, uploaded in one PUT each from wherever the bytes
// are (a range of a file: no layout on disk, no copy), fetched into whatever receives them (a range
// of a file: written in place). Several threads use one registry at once, each on its own
// connection; idle connections are kept for the next call.
//
// Registries answer 401 with what they want: Basic credentials, or a Bearer token from their token
// service (asked with the credentials when there are any); tokens are kept per repository. With
// tls_verify off a registry that does not speak TLS is spoken to in plain HTTP (a registry on
// loopback or a private network), as containers' own tools do for an insecure registry.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "checkpoint/registry/http_connection.h"
#include "checkpoint/registry/image_registry.h"

namespace nvproxy::checkpoint {

struct RegistryOptions {
  bool tls_verify = true;               // false: plain HTTP or unverified TLS
  std::string authfile;                 // empty: registry_auth.h's search
  std::chrono::seconds timeout{3600};   // one manifest or blob at most
  std::chrono::seconds io_timeout{60};  // no progress at all
};

class HttpRegistry final : public ImageRegistry {
 public:
  explicit HttpRegistry(RegistryOptions opts) : opts_(std::move(opts)) {}
  Manifest manifest(const std::string& reference) override;
  std::string put_manifest(const std::string& reference, const std::string& media_type, const std::string& text) override;
  bool has_blob(const std::string& repo, const std::string& digest) override;
  void put_blob(const std::string& repo, const std::string& digest, std::uint64_t size, const Reader& read) override;
  bool mount_blob(const std::string& repo, const std::string& digest, const std::string& from) override;
  void get_blob(const std::string& repo, const std::string& digest, std::uint64_t size, const Writer& write) override;

 private:
  struct Host {
    std::string name;       // as references name it ("host:5000")
    HttpEndpoint endpoint;  // scheme settled on first use
    bool settled = false;
    bool credentials_read = false;
    std::string credentials;                           // "user:password", or empty
    std::map<std::string, std::string> authorization;  // repository -> Authorization value
    std::vector<std::unique_ptr<HttpConnection>> idle;
  };
  // One exchange with the registry of `host` about `repository`, answering a 401 once with what it
  // asks for and following redirects (to storage elsewhere) without the registry's authorization.
  HttpResponse call(const std::string& host, const std::string& repository, const HttpRequest& req,
                    const ImageRegistry::Writer* sink, const std::string& what);
  std::unique_ptr<HttpConnection> connection(Host& h, std::chrono::steady_clock::time_point deadline);
  void give_back(Host& h, std::unique_ptr<HttpConnection> c);
  void authorize(Host& h, const std::string& repository, const std::string& challenge, bool push, const std::string& what,
                 std::chrono::steady_clock::time_point deadline);
  Host& host(const std::string& name);

  RegistryOptions opts_;
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<Host>> hosts_;
};

// The registry's own words from an error answer's body ({"errors": [{"code", "message"}]}), else the
// status line's number: what a failed call's message ends with.
std::string registry_error(const HttpResponse& r);

}  // namespace nvproxy::checkpoint
