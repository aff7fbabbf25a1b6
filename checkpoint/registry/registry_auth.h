// What a registry asks before it answers: the credentials of an auth file (the containers/ and
// Docker form: {"auths": {"host": {"auth": base64("user:password")}}}) and the WWW-Authenticate
// challenge of a 401 (Basic, or Bearer with the token service to ask).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace nvproxy::checkpoint {

struct Challenge {
  std::string scheme;                         // "basic" or "bearer", lower-case
  std::map<std::string, std::string> params;  // realm, service, scope
};

// The challenge of a WWW-Authenticate value; nullopt when it is none this code can answer.
std::optional<Challenge> parse_challenge(std::string_view header);

// "user:password" for `host` (as references name it: "host:5000", "docker.io") from `authfile`,
// or where none is named from $REGISTRY_AUTH_FILE, $XDG_RUNTIME_DIR/containers/auth.json,
// ~/.config/containers/auth.json, ~/.docker/config.json, the first that names the host; empty
// when none does. Error(InvalidArgument) naming the file when a named one is not JSON.
std::string credentials_for(const std::string& host, const std::string& authfile);

std::string base64_encode(std::string_view bytes);
std::string base64_decode(std::string_view text);  // empty when it is not base64
// RFC 3986's unreserved characters kept, every other byte %XX: a query parameter's value.
std::string percent_encode(std::string_view s);

}  // namespace nvproxy::checkpoint
