#include "checkpoint/registry/registry_reference.h"

#include <algorithm>

#include "common/error.h"

namespace nvproxy::checkpoint {

namespace {

bool is_hex64(const std::string& s) {
  return s.size() == 64 &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// A repository path component: lower-case letters, digits and the separators . _ -.
bool valid_repository(const std::string& r) {
  if (r.empty() || r.front() == '/' || r.back() == '/' || r.find("//") != std::string::npos) return false;
  return std::all_of(r.begin(), r.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-' || c == '/';
  });
}

}  // namespace

std::string RegistryReference::api_host() const {
  return host == "docker.io" ? "registry-1.docker.io" : host;
}

RegistryReference parse_reference(const std::string& reference) {
  auto bad = [&](const std::string& why) {
    return Error(Code::InvalidArgument, "\"" + reference + "\" is not an image reference: " + why);
  };
  RegistryReference out;
  std::string rest = reference;
  if (auto at = rest.find('@'); at != std::string::npos) {
    out.digest = rest.substr(at + 1);
    rest.resize(at);
    if (out.digest.rfind("sha256:", 0) != 0 || !is_hex64(out.digest.substr(7))) throw bad("its digest is not sha256:<64 hex>");
  }
  const auto slash = rest.find('/');
  const std::string first = rest.substr(0, slash);
  if (slash != std::string::npos &&
      (first.find('.') != std::string::npos || first.find(':') != std::string::npos || first == "localhost")) {
    out.host = first;
    rest = rest.substr(slash + 1);
  } else {
    out.host = "docker.io";
    if (slash == std::string::npos) rest = "library/" + rest;
  }
  if (auto colon = rest.rfind(':'); colon != std::string::npos) {
    out.tag = rest.substr(colon + 1);
    rest.resize(colon);
    if (out.tag.empty() || out.tag.size() > 128) throw bad("its tag is empty or too long");
  }
  if (out.tag.empty() && out.digest.empty()) out.tag = "latest";
  if (out.host.empty() || !valid_repository(rest)) throw bad("its repository \"" + rest + "\" is not one");
  out.repository = rest;
  return out;
}

}  // namespace nvproxy::checkpoint
