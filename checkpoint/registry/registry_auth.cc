#include "checkpoint/registry/registry_auth.h"

#include <openssl/evp.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "common/error.h"
#include "common/fs.h"

namespace nvproxy::checkpoint {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// "https://host:5000/v1/" -> "host:5000": an auth file's key as the host it names.
std::string host_of_key(std::string key) {
  if (auto p = key.find("://"); p != std::string::npos) key = key.substr(p + 3);
  key = key.substr(0, key.find('/'));
  if (key == "index.docker.io" || key == "registry-1.docker.io") key = "docker.io";
  return key;
}

std::string from_file(const fs::path& file, const std::string& host, bool named) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) {
    if (named) throw Error(Code::NotFound, "the registry auth file " + file.string() + " does not exist");
    return {};
  }
  json j = json::parse(read_file(file), nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw Error(Code::InvalidArgument, "the registry auth file " + file.string() + " is not JSON");
  const json auths = j.value("auths", json::object());
  if (!auths.is_object()) return {};
  for (const auto& [key, entry] : auths.items()) {
    if (host_of_key(key) != host || !entry.is_object()) continue;
    std::string pair = base64_decode(entry.value("auth", std::string()));
    if (pair.find(':') != std::string::npos) return pair;
  }
  return {};
}

}  // namespace

std::optional<Challenge> parse_challenge(std::string_view header) {
  std::string h(header);
  const auto sp = h.find(' ');
  Challenge c;
  c.scheme = lower(h.substr(0, sp));
  if (c.scheme != "basic" && c.scheme != "bearer") return std::nullopt;
  // key="value" pairs, comma separated; values may hold commas (a scope's "pull,push").
  std::size_t i = sp == std::string::npos ? h.size() : sp + 1;
  while (i < h.size()) {
    while (i < h.size() && (h[i] == ' ' || h[i] == ',')) ++i;
    auto eq = h.find('=', i);
    if (eq == std::string::npos) break;
    std::string key = lower(h.substr(i, eq - i)), value;
    i = eq + 1;
    if (i < h.size() && h[i] == '"') {
      auto end = h.find('"', i + 1);
      if (end == std::string::npos) return std::nullopt;
      value = h.substr(i + 1, end - i - 1);
      i = end + 1;
    } else {
      auto end = h.find(',', i);
      value = h.substr(i, end == std::string::npos ? std::string::npos : end - i);
      i = end == std::string::npos ? h.size() : end;
    }
    c.params[key] = value;
  }
  if (c.scheme == "bearer" && c.params["realm"].empty()) return std::nullopt;
  return c;
}

std::string credentials_for(const std::string& host, const std::string& authfile) {
  if (!authfile.empty()) return from_file(authfile, host, true);
  std::vector<fs::path> files;
  if (const char* f = std::getenv("REGISTRY_AUTH_FILE"); f && *f) files.emplace_back(f);
  if (const char* x = std::getenv("XDG_RUNTIME_DIR"); x && *x) files.push_back(fs::path(x) / "containers/auth.json");
  if (const char* home = std::getenv("HOME"); home && *home) {
    files.push_back(fs::path(home) / ".config/containers/auth.json");
    files.push_back(fs::path(home) / ".docker/config.json");
  }
  for (const auto& f : files)
    if (std::string c = from_file(f, host, false); !c.empty()) return c;
  return {};
}

std::string base64_encode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), reinterpret_cast<const unsigned char*>(bytes.data()),
                          static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

std::string base64_decode(std::string_view text) {
  if (text.empty() || text.size() % 4 != 0) return {};
  std::string out(3 * (text.size() / 4) + 1, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()), reinterpret_cast<const unsigned char*>(text.data()),
                          static_cast<int>(text.size()));
  if (n < 0) return {};
  // EVP_DecodeBlock counts the padding's bytes as data.
  std::size_t len = static_cast<std::size_t>(n);
  for (std::size_t i = text.size(); i > 0 && text[i - 1] == '='; --i) --len;
  out.resize(len);
  return out;
}

std::string percent_encode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace nvproxy::checkpoint
