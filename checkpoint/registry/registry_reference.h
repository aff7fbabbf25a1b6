// An image reference ("host:5000/team/llm:v1", "host/repo@sha256:...", "ubuntu") taken apart the
// way container tools read it: the first part names a registry when it has a dot, a port or is
// "localhost"; otherwise the image lives on Docker Hub, under library/ when it has no namespace.
#pragma once

#include <string>

namespace nvproxy::checkpoint {

struct RegistryReference {
  std::string host;        // "host:5000"; Docker Hub as "docker.io"
  std::string repository;  // "team/llm"
  std::string tag;         // empty when pinned
  std::string digest;      // "sha256:..." when pinned
  // Where the registry's API answers: Docker Hub's is not docker.io.
  [[nodiscard]] std::string api_host() const;
  // "host/repo": the form the store and the messages use.
  [[nodiscard]] std::string name() const { return host + "/" + repository; }
  // The tag or the digest: the last part of a manifest's URL.
  [[nodiscard]] std::string object() const { return digest.empty() ? tag : digest; }
};

// Error(InvalidArgument) naming the reference when it is none (empty parts, an upper-case
// repository, a digest that is not sha256 hex).
RegistryReference parse_reference(const std::string& reference);

}  // namespace nvproxy::checkpoint
