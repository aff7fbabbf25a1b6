#include "checkpoint/image/sha256.h"

#include <openssl/evp.h>

#include "common/error.h"

namespace nvproxy::checkpoint {

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  if (ctx_ == nullptr) throw Error(Code::ResourceExhausted, "sha256: no memory for a digest context");
  if (EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) != 1) {
    EVP_MD_CTX_free(ctx_);
    throw Error(Code::Internal, "sha256: libcrypto refused to start a digest");
  }
}

Sha256::~Sha256() {
  EVP_MD_CTX_free(ctx_);
}

void Sha256::update(const void* data, std::size_t n) {
  if (finished_) throw Error(Code::FailedPrecondition, "sha256: update after finish");
  if (EVP_DigestUpdate(ctx_, data, n) != 1) throw Error(Code::Internal, "sha256: libcrypto failed to digest data");
}

std::string Sha256::finish() {
  if (finished_) throw Error(Code::FailedPrecondition, "sha256: finish called twice");
  finished_ = true;
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx_, md, &len) != 1 || len != 32) throw Error(Code::Internal, "sha256: libcrypto failed to finish");
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "sha256:";
  out.reserve(out.size() + 2 * len);
  for (unsigned int i = 0; i < len; ++i) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 0xf];
  }
  return out;
}

std::string sha256_of(std::string_view bytes) {
  Sha256 h;
  h.update(bytes.data(), bytes.size());
  return h.finish();
}

}  // namespace nvproxy::checkpoint
