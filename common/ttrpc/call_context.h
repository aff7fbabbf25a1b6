// What a ttrpc handler learns about its call besides the payload.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace nvproxy::ttrpc {

// ttrpc metadata: a key may repeat (Go's MD is map[string][]string). containerd sends its
// namespace under "containerd-namespace-ttrpc".
using Metadata = std::multimap<std::string, std::string, std::less<>>;

inline constexpr std::string_view kNamespaceKey = "containerd-namespace-ttrpc";

struct CallContext {
  std::string service;
  std::string method;
  std::uint32_t stream_id = 0;
  Metadata metadata;
  // The caller's timeout (Request.timeout_nano), if it set one. The server does not cancel
  // handlers; long-running ones may consult deadline to give up early.
  std::optional<std::chrono::nanoseconds> timeout;
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();

  // First value of key, if any.
  [[nodiscard]] std::optional<std::string> get(std::string_view key) const {
    auto it = metadata.find(key);
    if (it == metadata.end()) return std::nullopt;
    return it->second;
  }
};

}  // namespace nvproxy::ttrpc
