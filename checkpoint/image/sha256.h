// SHA-256 through OpenSSL's EVP interface (libcrypto): the digest form of OCI descriptors, computed
// in process so that a checkpoint's files are hashed by as many readers as the disk keeps busy
// (sha256sum is one reader per file).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

struct evp_md_ctx_st;  // OpenSSL's EVP_MD_CTX, kept out of this header

namespace nvproxy::checkpoint {

// SHA-256 through OpenSSL's EVP interface (libcrypto); the digest form of OCI descriptors.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, std::size_t n);
  std::string finish();  // "sha256:<64 lowercase hex>"; once

 private:
  evp_md_ctx_st* ctx_;
  bool finished_ = false;
};

std::string sha256_of(std::string_view bytes);  // "sha256:<hex>"

}  // namespace nvproxy::checkpoint
