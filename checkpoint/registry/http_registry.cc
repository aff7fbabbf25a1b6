#include "checkpoint/registry/http_registry.h"

#include <nlohmann/json.hpp>

#include "checkpoint/image/sha256.h"
#include "checkpoint/registry/registry_auth.h"
#include "checkpoint/registry/registry_reference.h"
#include "common/error.h"

namespace nvproxy::checkpoint {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kManifestAccept =
    "application/vnd.oci.image.manifest.v1+json, application/vnd.oci.image.index.v1+json, "
    "application/vnd.docker.distribution.manifest.v2+json, application/vnd.docker.distribution.manifest.list.v2+json";

// "host/repo" -> {"host", "repo"}, as repository_of() gives it.
std::pair<std::string, std::string> split_repo(const std::string& repo) {
  const RegistryReference r = parse_reference(repo + ":x");
  return {r.host, r.repository};
}

// The request target of an upload a registry opened: its Location, absolute or a path.
std::string upload_target(const std::string& location, bool verify) {
  return location.rfind("http", 0) == 0 ? parse_url(location, verify).second : location;
}

Code code_of(int status) {
  switch (status) {
    case 401: return Code::Unauthenticated;
    case 403: return Code::PermissionDenied;
    case 404: return Code::NotFound;
    case 400: return Code::InvalidArgument;
    default: return Code::Unavailable;
  }
}

}  // namespace

std::string registry_error(const HttpResponse& r) {
  json j = json::parse(r.body, nullptr, false);
  std::string words;
  if (j.is_object() && j.contains("errors") && j["errors"].is_array())
    for (const auto& e : j["errors"])
      if (e.is_object())
        words += (words.empty() ? "" : "; ") + e.value("code", std::string()) + " " + e.value("message", std::string());
  return "HTTP " + std::to_string(r.status) + (words.empty() ? "" : " (" + words + ")");
}

HttpRegistry::Host& HttpRegistry::host(const std::string& name) {
  std::lock_guard lock(mu_);
  auto& h = hosts_[name];
  if (!h) {
    h = std::make_unique<Host>();
    h->name = name;
    RegistryReference r{.host = name};
    h->endpoint = parse_url("https://" + r.api_host() + "/", opts_.tls_verify).first;
  }
  return *h;
}

std::unique_ptr<HttpConnection> HttpRegistry::connection(Host& h, Clock::time_point deadline) {
  std::unique_lock lock(mu_);
  if (!h.idle.empty()) {
    auto c = std::move(h.idle.back());
    h.idle.pop_back();
    return c;
  }
  if (!h.settled) {
    // Held while settling: the first call decides the scheme for all.
    auto c = std::make_unique<HttpConnection>(h.endpoint, opts_.io_timeout);
    try {
      c->open(deadline);
    } catch (const Error& e) {
      if (opts_.tls_verify || e.code() == Code::DeadlineExceeded) throw;
      // Not TLS: an insecure registry in plain HTTP (port 443 becomes 80 unless one was named).
      h.endpoint.tls = false;
      if (h.name.find(':') == std::string::npos) h.endpoint.port = "80";
      c = std::make_unique<HttpConnection>(h.endpoint, opts_.io_timeout);
      c->open(deadline);
    }
    h.settled = true;
    return c;
  }
  lock.unlock();
  return std::make_unique<HttpConnection>(h.endpoint, opts_.io_timeout);
}

void HttpRegistry::give_back(Host& h, std::unique_ptr<HttpConnection> c) {
  if (!c->reusable()) return;
  std::lock_guard lock(mu_);
  if (h.idle.size() < 32) h.idle.push_back(std::move(c));
}

void HttpRegistry::authorize(Host& h, const std::string& repository, const std::string& header, bool push,
                             const std::string& what, Clock::time_point deadline) {
  auto ch = parse_challenge(header);
  if (!ch)
    throw Error(Code::Unauthenticated, what + ": the registry asks for authentication this shim cannot give (" + header + ")");
  std::string creds;
  {
    std::lock_guard lock(mu_);
    if (!h.credentials_read) {
      h.credentials = credentials_for(h.name, opts_.authfile);
      h.credentials_read = true;
    }
    creds = h.credentials;
  }
  std::string value;
  if (ch->scheme == "basic") {
    if (creds.empty())
      throw Error(Code::Unauthenticated,
                  what + ": the registry " + h.name + " asks for credentials and no auth file has any for it");
    value = "Basic " + base64_encode(creds);
  } else {
    std::string scope = ch->params["scope"];
    if (scope.empty()) scope = "repository:" + repository + (push ? ":pull,push" : ":pull");
    std::string url = ch->params["realm"] + (ch->params["realm"].find('?') == std::string::npos ? "?" : "&") +
                      "service=" + percent_encode(ch->params["service"]) + "&scope=" + percent_encode(scope);
    auto [ep, target] = parse_url(url, opts_.tls_verify);
    HttpConnection c(ep, opts_.io_timeout);
    HttpRequest req{.method = Method::Get, .target = target};
    if (!creds.empty()) req.headers.emplace_back("Authorization", "Basic " + base64_encode(creds));
    HttpResponse r = c.exchange(req, nullptr, deadline);
    if (r.status != 200)
      throw Error(code_of(r.status), what + ": the token service " + ep.url(target) + " refused: " + registry_error(r));
    json j = json::parse(r.body, nullptr, false);
    std::string token = j.is_object() ? j.value("token", j.value("access_token", std::string())) : std::string();
    if (token.empty()) throw Error(Code::Unauthenticated, what + ": the token service " + ep.url("") + " gave no token");
    value = "Bearer " + token;
  }
  std::lock_guard lock(mu_);
  h.authorization[repository] = value;
}

HttpResponse HttpRegistry::call(const std::string& host_name, const std::string& repository, const HttpRequest& req,
                                const ImageRegistry::Writer* sink, const std::string& what) {
  const Clock::time_point deadline = Clock::now() + opts_.timeout;
  Host& h = host(host_name);
  const bool push = req.method == Method::Post || req.method == Method::Put || req.method == Method::Delete;
  for (int attempt = 0;; ++attempt) {
    HttpRequest r = req;
    {
      std::lock_guard lock(mu_);
      if (auto it = h.authorization.find(repository); it != h.authorization.end())
        r.headers.emplace_back("Authorization", it->second);
    }
    auto c = connection(h, deadline);
    HttpResponse resp = c->exchange(r, sink, deadline);
    give_back(h, std::move(c));
    if (resp.status == 401 && attempt == 0) {
      authorize(h, repository, resp.header("www-authenticate"), push, what, deadline);
      continue;
    }
    // Blobs may live elsewhere (object storage): follow, without the registry's authorization.
    for (int hop = 0; (resp.status == 307 || resp.status == 302 || resp.status == 303) && hop < 5; ++hop) {
      auto [ep, target] = parse_url(resp.header("location"), opts_.tls_verify);
      HttpConnection away(ep, opts_.io_timeout);
      resp = away.exchange({.method = req.method == Method::Head ? Method::Head : Method::Get, .target = target}, sink, deadline);
    }
    return resp;
  }
}

ImageRegistry::Manifest HttpRegistry::manifest(const std::string& reference) {
  const RegistryReference ref = parse_reference(reference);
  const std::string what = "reading the manifest of " + reference;
  HttpResponse r = call(ref.host, ref.repository,
                        {.method = Method::Get,
                         .target = "/v2/" + ref.repository + "/manifests/" + ref.object(),
                         .headers = {{"Accept", kManifestAccept}}},
                        nullptr, what);
  if (r.status != 200) throw Error(code_of(r.status), what + " failed: " + registry_error(r));
  Manifest m{.text = r.body, .digest = sha256_of(r.body), .media_type = r.header("content-type")};
  if (!ref.digest.empty() && m.digest != ref.digest)
    throw Error(Code::DataLoss, what + ": the registry answered bytes of digest " + m.digest);
  return m;
}

std::string HttpRegistry::put_manifest(const std::string& reference, const std::string& media_type, const std::string& text) {
  const RegistryReference ref = parse_reference(reference);
  const std::string what = "storing the manifest of " + reference;
  HttpResponse r = call(ref.host, ref.repository,
                        {.method = Method::Put,
                         .target = "/v2/" + ref.repository + "/manifests/" + ref.object(),
                         .headers = {{"Content-Type", media_type}},
                         .text = text},
                        nullptr, what);
  if (r.status != 201 && r.status != 200) throw Error(code_of(r.status), what + " failed: " + registry_error(r));
  std::string digest = sha256_of(text);
  if (auto said = r.header("docker-content-digest"); !said.empty() && said != digest)
    throw Error(Code::DataLoss, what + ": the registry stored it as " + said + ", its bytes are " + digest);
  return digest;
}

bool HttpRegistry::has_blob(const std::string& repo, const std::string& digest) {
  auto [host_name, repository] = split_repo(repo);
  const std::string what = "looking for blob " + digest + " in " + repo;
  HttpResponse r =
      call(host_name, repository, {.method = Method::Head, .target = "/v2/" + repository + "/blobs/" + digest}, nullptr, what);
  if (r.status == 200) return true;
  if (r.status == 404) return false;
  throw Error(code_of(r.status), what + " failed: " + registry_error(r));
}

void HttpRegistry::put_blob(const std::string& repo, const std::string& digest, std::uint64_t size, const Reader& read) {
  auto [host_name, repository] = split_repo(repo);
  const std::string what = "uploading blob " + digest + " (" + std::to_string(size) + " bytes) to " + repo;
  HttpResponse start =
      call(host_name, repository, {.method = Method::Post, .target = "/v2/" + repository + "/blobs/uploads/"}, nullptr, what);
  const std::string location = start.header("location");
  if (start.status != 202 || location.empty())
    throw Error(code_of(start.status), what + " failed to start: " + registry_error(start));
  std::string target = upload_target(location, opts_.tls_verify);
  target += (target.find('?') == std::string::npos ? "?" : "&") + std::string("digest=") + percent_encode(digest);
  // One PUT with the whole blob: the monolithic upload every registry takes.
  HttpResponse done = call(host_name, repository,
                           {.method = Method::Put,
                            .target = target,
                            .headers = {{"Content-Type", "application/octet-stream"}},
                            .body = &read,
                            .body_size = size},
                           nullptr, what);
  if (done.status != 201) throw Error(code_of(done.status), what + " failed: " + registry_error(done));
}

bool HttpRegistry::mount_blob(const std::string& repo, const std::string& digest, const std::string& from) {
  auto [host_name, repository] = split_repo(repo);
  auto [from_host, from_repository] = split_repo(from);
  if (from_host != host_name) return false;
  const std::string what = "mounting blob " + digest + " from " + from + " into " + repo;
  HttpResponse r = call(host_name, repository,
                        {.method = Method::Post,
                         .target = "/v2/" + repository + "/blobs/uploads/?mount=" + percent_encode(digest) +
                                   "&from=" + percent_encode(from_repository)},
                        nullptr, what);
  if (r.status == 201) return true;
  // Not mounted: a registry opens an upload instead (202), which is given back.
  if (const std::string location = r.header("location"); r.status == 202 && !location.empty()) {
    try {
      call(host_name, repository, {.method = Method::Delete, .target = upload_target(location, opts_.tls_verify)}, nullptr, what);
    } catch (const Error&) {  // the registry expires uploads left open
    }
  }
  return false;
}

void HttpRegistry::get_blob(const std::string& repo, const std::string& digest, std::uint64_t size, const Writer& write) {
  auto [host_name, repository] = split_repo(repo);
  const std::string what = "fetching blob " + digest + " of " + repo;
  Sha256 sum;
  std::uint64_t got = 0;
  const Writer sink = [&](std::uint64_t at, const char* data, std::size_t n) {
    if (at + n > size) throw Error(Code::DataLoss, what + ": the registry sent more than its " + std::to_string(size) + " bytes");
    sum.update(data, n);
    write(at, data, n);
    got = at + n;
  };
  HttpResponse r =
      call(host_name, repository, {.method = Method::Get, .target = "/v2/" + repository + "/blobs/" + digest}, &sink, what);
  if (r.status != 200) throw Error(code_of(r.status), what + " failed: " + registry_error(r));
  if (got != size)
    throw Error(Code::DataLoss, what + ": " + std::to_string(got) + " bytes arrived, the manifest says " + std::to_string(size));
  if (std::string d = sum.finish(); d != digest) throw Error(Code::DataLoss, what + ": the bytes that arrived are " + d);
}

}  // namespace nvproxy::checkpoint
