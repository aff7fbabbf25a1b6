// A registry for the transfer tests: blobs in a directory, manifests by reference, the same
// contract as HttpRegistry (digests checked on the way in and out: DataLoss), with counters and
// hooks to damage a blob or fail after some fetches.
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "checkpoint/image/sha256.h"
#include "checkpoint/registry/image_registry.h"
#include "checkpoint/registry/image_transfer.h"
#include "common/error.h"
#include "common/fs.h"

namespace nvproxy::checkpoint {

class MemoryRegistry final : public ImageRegistry {
 public:
  explicit MemoryRegistry(std::filesystem::path root) : root_(std::move(root)) { std::filesystem::create_directories(root_); }
  ~MemoryRegistry() override { std::filesystem::remove_all(root_); }
  MemoryRegistry(const MemoryRegistry&) = delete;
  MemoryRegistry& operator=(const MemoryRegistry&) = delete;

  Manifest manifest(const std::string& reference) override {
    std::lock_guard lock(mu_);
    ++manifests;
    auto it = manifests_.find(reference);
    if (it == manifests_.end()) throw Error(Code::NotFound, "manifest unknown: " + reference);
    return {it->second, sha256_of(it->second), "application/vnd.oci.image.manifest.v1+json"};
  }
  std::string put_manifest(const std::string& reference, const std::string&, const std::string& text) override {
    std::lock_guard lock(mu_);
    const std::string digest = sha256_of(text);
    manifests_[reference] = text;
    manifests_[repository_of(reference) + "@" + digest] = text;
    pushed.push_back({reference, digest});
    return digest;
  }
  bool has_blob(const std::string& repo, const std::string& digest) override {
    std::lock_guard lock(mu_);
    return blobs_[repo].count(digest) > 0;
  }
  void put_blob(const std::string& repo, const std::string& digest, std::uint64_t size, const Reader& read) override {
    std::string bytes(size, '\0');
    for (std::uint64_t at = 0; at < size;) {
      std::size_t n = read(at, bytes.data() + at, std::min<std::uint64_t>(size - at, 5000));
      if (n == 0) throw Error(Code::DataLoss, "the body ended early");
      at += n;
    }
    if (refuse_put && refuse_put(digest)) throw Error(Code::InvalidArgument, "DIGEST_INVALID " + digest + " (refused)");
    if (sha256_of(bytes) != digest) throw Error(Code::InvalidArgument, "DIGEST_INVALID " + digest);
    write_file_atomic(blob_file(digest), bytes, 0600);
    std::lock_guard lock(mu_);
    blobs_[repo].insert(digest);
    ++puts;
    bytes_put += size;
  }
  bool mount_blob(const std::string& repo, const std::string& digest, const std::string& from) override {
    std::lock_guard lock(mu_);
    if (!blobs_[from].count(digest)) {
      ++mount_refusals;
      return false;
    }
    blobs_[repo].insert(digest);
    ++mounts;
    return true;
  }
  void get_blob(const std::string& repo, const std::string& digest, std::uint64_t size, const Writer& write) override {
    {
      std::lock_guard lock(mu_);
      if (!blobs_[repo].count(digest)) throw Error(Code::NotFound, "blob unknown: " + digest);
      if (fail_after_gets >= 0 && gets >= fail_after_gets) throw Error(Code::Unavailable, "the registry went away");
      ++gets;
      bytes_got += size;
    }
    std::string bytes = read_file(blob_file(digest));
    if (damage) damage(digest, bytes);
    for (std::uint64_t at = 0; at < bytes.size(); at += 7000)
      write(at, bytes.data() + at, std::min<std::uint64_t>(7000, bytes.size() - at));
    if (bytes.size() != size || sha256_of(bytes) != digest)
      throw Error(Code::DataLoss, "fetching blob " + digest + ": not its bytes");
  }

  std::filesystem::path blob_file(const std::string& digest) const { return root_ / digest.substr(7); }
  struct Push {
    std::string reference, digest;
  };
  std::vector<Push> pushed;
  std::atomic<int> manifests{0}, gets{0}, puts{0}, mounts{0}, mount_refusals{0};
  std::atomic<std::uint64_t> bytes_got{0}, bytes_put{0};
  int fail_after_gets = -1;
  std::function<void(const std::string& digest, std::string& bytes)> damage;
  std::function<bool(const std::string& digest)> refuse_put;  // a 400 for these uploads

 private:
  std::filesystem::path root_;
  std::mutex mu_;
  std::map<std::string, std::string> manifests_;
  std::map<std::string, std::set<std::string>> blobs_;
};

}  // namespace nvproxy::checkpoint
