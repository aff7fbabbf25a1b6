#include "checkpoint/registry/chunk_transfer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <exception>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <thread>

#include "checkpoint/image/image_record.h"
#include "checkpoint/image/sha256.h"
#include "checkpoint/registry/chunk_plan.h"
#include "checkpoint/registry/chunk_zstd.h"
#include "checkpoint/registry/image_transfer.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/unique_fd.h"

namespace nvproxy::checkpoint {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kJournal = ".chunks-done";
constexpr const char* kManifestMediaType = "application/vnd.oci.image.manifest.v1+json";

// task(i) for every i below n on `streams` threads, each up to `attempts` times (1 s, 2 s... apart:
// a registry restarting). After one task failed all its attempts no new one starts; its error is
// rethrown once the running ones end.
void run_streams(std::size_t n, int streams, int attempts, const std::function<void(std::size_t)>& task) {
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  std::exception_ptr first;
  auto worker = [&] {
    for (std::size_t i = next++; i < n && !failed; i = next++) {
      for (int attempt = 1;; ++attempt) {
        try {
          task(i);
          break;
        } catch (const std::exception&) {
          if (attempt >= attempts || failed) {
            std::lock_guard lock(mu);
            if (!first) first = std::current_exception();
            failed = true;
            return;
          }
          std::this_thread::sleep_for(std::chrono::seconds(attempt));
        }
      }
    }
  };
  std::vector<std::thread> threads;
  const auto count = std::min<std::size_t>(n, static_cast<std::size_t>(std::max(1, streams)));
  threads.reserve(count);
  for (std::size_t k = 0; k < count; ++k) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

bool all_zero(const char* p, std::size_t n) {
  return n == 0 || (p[0] == 0 && std::memcmp(p, p + 1, n - 1) == 0);
}

UniqueFd open_or_throw(const fs::path& p, int flags, const std::string& what) {
  UniqueFd fd(::open(p.c_str(), flags | O_CLOEXEC, 0600));
  if (!fd) throw sys_error(what + ": opening " + p.string());
  return fd;
}

std::string journal_line(const LayoutFile& c) {
  return c.digest + " " + std::to_string(c.offset) + " " + c.path + "\n";
}

// Where earlier pulls hold each chunk: digest -> file and offset.
std::map<std::string, LayoutFile> chunks_of(const std::vector<fs::path>& entries) {
  std::map<std::string, LayoutFile> out;
  for (const auto& e : entries) {
    std::error_code ec;
    if (!fs::is_regular_file(e / kManifestFile, ec)) continue;
    try {
      for (auto c : parse_artifact_manifest(json::parse(read_file(e / kManifestFile))).files) {
        c.path = (e / c.path).string();
        out.emplace(c.digest, c);
      }
    } catch (const std::exception&) {
      // an entry this code cannot read offers nothing
    }
  }
  return out;
}

// Reads `size` bytes of fd from `offset` in pieces of at most 8 MiB and hands each to
// piece(data, len, at) (at: from `offset`); false where the file ends early or a piece returns
// false. The digest of what was read is the caller's, over the pieces.
template <class Piece>
bool read_range(int fd, std::uint64_t offset, std::uint64_t size, Piece&& piece) {
  std::vector<char> buf(std::min<std::uint64_t>(std::max<std::uint64_t>(size, 1), 8 << 20));
  for (std::uint64_t at = 0; at < size;) {
    const long n = read_at(fd, buf.data(), std::min<std::uint64_t>(buf.size(), size - at), offset + at);
    if (n <= 0) return false;
    const auto len = static_cast<std::size_t>(n);
    if (!piece(buf.data(), len, at)) return false;
    at += len;
  }
  return true;
}

// Copies an earlier pull's chunk into place, its digest checked again; false when it is not what
// it was (then the chunk is fetched).
bool copy_earlier(const LayoutFile& from, int to_fd, std::uint64_t to_offset, const std::string& digest, TransferProgress& prog) {
  UniqueFd in(::open(from.path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in) return false;
  Sha256 sum;
  return read_range(in.get(), from.offset, from.size,
                    [&](const char* data, std::size_t len, std::uint64_t at) {
                      sum.update(data, len);
                      if (!all_zero(data, len) && !write_all_at(to_fd, std::string_view(data, len), to_offset + at)) return false;
                      prog.skipped(len);
                      return true;
                    }) &&
         sum.finish() == digest;
}

// Whether the bytes at c's place in fd are c's (its digest over them).
bool holds_chunk(int fd, const LayoutFile& c) {
  Sha256 sum;
  return read_range(fd, c.offset, c.size,
                    [&](const char* data, std::size_t len, std::uint64_t) {
                      sum.update(data, len);
                      return true;
                    }) &&
         sum.finish() == c.digest;
}

// Every chunk takes the blob (compressed or not) of the one of `unique` with its digest: the same
// bytes go as one blob.
void share_blobs(const std::vector<std::size_t>& unique, std::vector<LayoutFile>& chunks) {
  std::map<std::string, const LayoutFile*> first;
  for (std::size_t i : unique) first.emplace(chunks[i].digest, &chunks[i]);
  for (auto& c : chunks) {
    const LayoutFile* f = first.at(c.digest);
    c.zstd_digest = f->zstd_digest;
    c.zstd_size = f->zstd_size;
  }
}

// Each chunk of `unique` (indices into chunks) compressed once on `threads` readers: one that
// shrinks by a tenth travels compressed (its blob digest and size set), the others as they are;
// a chunk that repeats one of `unique` takes its blob.
void compress_where_it_pays(const fs::path& image_dir, const std::string& reference, const std::vector<std::size_t>& unique,
                            std::vector<LayoutFile>& chunks, int threads) {
  run_streams(unique.size(), threads, 1, [&](std::size_t k) {
    LayoutFile& c = chunks[unique[k]];
    const fs::path file = image_dir / c.path;
    UniqueFd fd = open_or_throw(file, O_RDONLY, "pushing " + reference);
    const ZstdPacked p = zstd_measure(fd.get(), c.offset, c.size, "pushing " + reference + ": compressing " + file.string());
    if (p.size * 10 <= c.size * 9) {
      c.zstd_digest = p.digest;
      c.zstd_size = p.size;
    }
  });
  share_blobs(unique, chunks);
}

}  // namespace

bool verify_pulled(const fs::path& entry, int threads) {
  ArtifactManifest m;
  try {
    m = parse_artifact_manifest(json::parse(read_file(entry / kManifestFile)));
  } catch (const std::exception&) {
    return false;
  }
  std::map<std::string, UniqueFd> fds;
  for (const auto& [path, size] : file_sizes(m)) {
    UniqueFd fd(::open((entry / path).c_str(), O_RDONLY | O_CLOEXEC));
    struct stat st {};
    if (!fd || ::fstat(fd.get(), &st) != 0 || static_cast<std::uint64_t>(st.st_size) != size) return false;
    fds.emplace(path, std::move(fd));
  }
  std::atomic<bool> whole{true};
  run_streams(m.files.size(), threads, 1, [&](std::size_t i) {
    if (whole && !holds_chunk(fds.at(m.files[i].path).get(), m.files[i])) whole = false;
  });
  return whole;
}

namespace {

// What a push sends: the chunks in file order, the first of each digest (the same bytes twice,
// zero chunks, go once), the manifest naming them.
struct PushPlan {
  std::vector<LayoutFile> chunks;
  std::vector<std::size_t> unique;  // indices into chunks
  std::uint64_t bytes = 0, repeated = 0, chunk_bytes = 0;
  std::set<std::string> files;
  std::string manifest;
};

// The plan at starting_chunk_bytes; where its manifest would still pass opts.manifest_budget, at
// the power of two times that size whose manifest fits (the image read again).
PushPlan plan_push(const fs::path& image_dir, const std::string& reference, const std::string& record,
                   const TransferOptions& opts) {
  // The plan reads every byte before the first upload: every CPU hashes (the uploads then wait on
  // the registry, not on this).
  const int threads = std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 2, 32);
  // An estimate only: what cannot be read here, plan_chunks names.
  std::uint64_t bytes = 0, files = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(image_dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_regular_file(ec)) {
      bytes += it->file_size(ec);
      ++files;
    }
  for (std::uint64_t chunk_bytes = starting_chunk_bytes(bytes, files, opts);;) {
    PushPlan p{.chunk_bytes = chunk_bytes};
    std::set<std::string> seen;
    for (const auto& c : plan_chunks(image_dir, {.max_bytes = chunk_bytes, .threads = threads})) {
      p.chunks.push_back({.path = c.path, .digest = c.digest, .size = c.size, .offset = c.offset});
      p.files.insert(c.path);
      p.bytes += c.size;
      if (seen.insert(c.digest).second)
        p.unique.push_back(p.chunks.size() - 1);
      else
        p.repeated += c.size;
    }
    if (opts.zstd) compress_where_it_pays(image_dir, reference, p.unique, p.chunks, threads);
    p.manifest = artifact_manifest_text(p.chunks, record);
    if (p.manifest.size() <= opts.manifest_budget || p.chunks.size() <= 1) return p;
    chunk_bytes *= std::bit_ceil((p.manifest.size() + opts.manifest_budget - 1) / opts.manifest_budget);
  }
}

}  // namespace

std::uint64_t starting_chunk_bytes(std::uint64_t bytes, std::uint64_t files, const TransferOptions& opts) {
  // A layer entry: media type, digest, size, title and offset (about 270 bytes), and the
  // compressed form's digest and size where zstd is on.
  const std::uint64_t entry = opts.zstd ? 420 : 280;
  auto fitting = [&](std::uint64_t image_bytes) {
    std::uint64_t chunk = std::max<std::uint64_t>(opts.chunk_bytes, 4096);
    while ((files + image_bytes / expected_chunk_bytes({.max_bytes = chunk})) * entry > opts.manifest_budget &&
           chunk < (std::uint64_t{1} << 40))
      chunk *= 2;
    return chunk;
  };
  const std::uint64_t chunk = fitting(bytes);
  // Hysteresis: a server checkpointed at 56 GiB, then 54, then 56 is cut alike each time.
  if (opts.last_chunk_bytes > chunk && fitting(2 * bytes) >= opts.last_chunk_bytes) return opts.last_chunk_bytes;
  return chunk;
}

ChunkPush push_chunked(const fs::path& image_dir, const std::string& reference, ImageRegistry& registry,
                       const TransferOptions& opts, const BlobSources& sources) {
  std::string record = "{}";
  if (auto rec = read_image_record(image_dir)) record = to_json(*rec).dump();
  const std::string repo = repository_of(reference);
  PushPlan plan = plan_push(image_dir, reference, record, opts);
  std::vector<LayoutFile>& chunks = plan.chunks;
  const std::vector<std::size_t>& unique = plan.unique;
  ChunkPush out{.bytes = plan.bytes};

  TransferProgress prog("pushing " + human_bytes(out.bytes) + " to " + reference, out.bytes, opts.progress, opts.terminal);
  prog.skipped(plan.repeated);
  std::atomic<std::uint64_t> wire{0}, mounted{0};
  std::atomic<int> refused{0};
  const std::string config_digest = sha256_of(record);
  if (!registry.has_blob(repo, config_digest))
    registry.put_blob(repo, config_digest, record.size(), [&](std::uint64_t at, char* buf, std::size_t n) {
      const std::size_t len = std::min<std::size_t>(n, record.size() - at);
      std::copy_n(record.data() + at, len, buf);
      return len;
    });
  // A compressed chunk the registry refused (400: its bytes not the digest the plan measured) goes
  // as it is on its next attempt: compression never costs a push.
  std::vector<char> plain(unique.size(), 0);
  run_streams(unique.size(), opts.streams, opts.attempts, [&](std::size_t k) {
    LayoutFile& c = chunks[unique[k]];
    if (plain[k]) {
      c.zstd_digest.clear();
      c.zstd_size = 0;
    }
    if (registry.has_blob(repo, c.blob_digest())) {
      prog.skipped(c.size);
      return;
    }
    // A registry that refused the first 16 mounts it was asked for (no pull right on the source,
    // the blobs collected) is not asked again: each costs two requests before the upload.
    if (const std::string* from = sources.find(c.blob_digest()); from && (mounted > 0 || refused < 16)) {
      if (registry.mount_blob(repo, c.blob_digest(), *from)) {
        prog.skipped(c.size);
        mounted += c.size;
        return;
      }
      ++refused;
    }
    const fs::path file = image_dir / c.path;
    UniqueFd fd = open_or_throw(file, O_RDONLY, "pushing " + reference);
    std::uint64_t sent = 0;  // of the chunk's own bytes, read so far
    auto account = [&](std::uint64_t now, std::size_t uploaded) {
      if (now >= sent)
        prog.moved(now - sent);
      else
        prog.unmoved(sent - now);  // the upload started again
      sent = now;
      wire += uploaded;
    };
    std::optional<ZstdChunkReader> packed;
    if (!c.zstd_digest.empty())
      packed.emplace(fd.get(), c.offset, c.size, "pushing " + reference + ": compressing " + file.string());
    try {
      registry.put_blob(repo, c.blob_digest(), c.blob_size(), [&](std::uint64_t at, char* buf, std::size_t n) {
        if (packed) {
          const std::size_t got = packed->read(at, buf, n);
          account(packed->consumed(), got);
          return got;
        }
        const long got = read_at(fd.get(), buf, std::min<std::uint64_t>(n, c.size - at), c.offset + at);
        if (got < 0) throw sys_error("pushing " + reference + ": reading " + file.string());
        account(at + static_cast<std::uint64_t>(got), static_cast<std::size_t>(got));
        return static_cast<std::size_t>(got);
      });
    } catch (const Error& e) {
      prog.unmoved(sent);
      if (packed && e.code() == Code::InvalidArgument) plain[k] = 1;
      throw;
    } catch (...) {
      prog.unmoved(sent);
      throw;
    }
  });
  if (std::find(plain.begin(), plain.end(), 1) != plain.end()) {
    share_blobs(unique, chunks);  // each digest as it went
    plan.manifest = artifact_manifest_text(chunks, record);
  }
  out.digest = registry.put_manifest(reference, kManifestMediaType, plan.manifest);
  out.manifest = plan.manifest;
  out.sent = prog.moved_bytes();
  out.skipped = prog.skipped_bytes();
  out.mounted = mounted;
  out.wire = wire;
  out.files = static_cast<int>(plan.files.size());
  out.chunks = static_cast<int>(chunks.size());
  out.chunk_bytes = plan.chunk_bytes;
  out.summary = prog.finish("sent");
  if (plan.chunk_bytes != opts.chunk_bytes)
    out.summary += "; chunks of up to " + human_bytes(plan.chunk_bytes) + ", not " + human_bytes(opts.chunk_bytes) +
                   (plan.chunk_bytes == opts.last_chunk_bytes
                        ? ": as the last push into this repository was cut, so that its chunks are found again"
                        : ": so many chunks would have made a manifest larger than registries take (4 MiB)");
  if (out.mounted > 0) out.summary += ", " + human_bytes(out.mounted) + " of that mounted from other repositories";
  if (opts.zstd) out.summary += ", " + human_bytes(out.wire) + " of it uploaded (zstd)";
  return out;
}

ChunkPull pull_chunked(const std::string& repo, const ArtifactManifest& m, const fs::path& dir,
                       const std::vector<fs::path>& earlier, ImageRegistry& registry, const TransferOptions& opts) {
  const std::string what = "pulling " + repo + " into " + dir.string();
  fs::create_directories(dir);
  std::set<std::string> whole;
  {
    std::ifstream j(dir / kJournal);
    for (std::string line; std::getline(j, line);) whole.insert(line + "\n");
  }
  std::map<std::string, UniqueFd> fds;
  std::uint64_t total = 0;
  for (const auto& [path, size] : file_sizes(m)) {
    const fs::path file = dir / path;
    fs::create_directories(file.parent_path());
    UniqueFd fd = open_or_throw(file, O_RDWR | O_CREAT, what);
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) throw sys_error(what + ": " + file.string());
    if (static_cast<std::uint64_t>(st.st_size) != size && ::ftruncate(fd.get(), static_cast<off_t>(size)) != 0)
      throw sys_error(what + ": sizing " + file.string());
    fds.emplace(path, std::move(fd));
    total += size;
  }
  UniqueFd journal = open_or_throw(dir / kJournal, O_WRONLY | O_CREAT | O_APPEND, what);
  const std::map<std::string, LayoutFile> have = chunks_of(earlier);

  ChunkPull out;
  TransferProgress prog("pulling " + human_bytes(total) + " from " + repo, total, opts.progress, opts.terminal);
  // The journal is not synced chunk by chunk (that would hold every stream to the disk's pace):
  // what it lists is taken only where the bytes in place still have the chunk's digest (after a
  // crash of the host they may not).
  std::vector<std::size_t> listed;  // indices into m.files
  for (std::size_t i = 0; i < m.files.size(); ++i)
    if (whole.count(journal_line(m.files[i]))) listed.push_back(i);
  std::vector<char> resumed(m.files.size(), 0);
  run_streams(listed.size(), opts.streams, 1, [&](std::size_t k) {
    const LayoutFile& c = m.files[listed[k]];
    resumed[listed[k]] = holds_chunk(fds.at(c.path).get(), c) ? 1 : 0;
  });
  // One fetch per digest: the same bytes elsewhere in the image (zero chunks, a file twice) are
  // copied from where they landed.
  std::map<std::string, std::vector<const LayoutFile*>> by_digest;
  for (std::size_t i = 0; i < m.files.size(); ++i) {
    const LayoutFile& c = m.files[i];
    if (resumed[i]) {
      prog.skipped(c.size);
      out.resumed += c.size;
    } else {
      by_digest[c.digest].push_back(&c);
    }
  }
  std::vector<const std::vector<const LayoutFile*>*> todo;
  for (const auto& [digest, places] : by_digest) todo.push_back(&places);
  std::mutex mu;
  std::atomic<std::uint64_t> reused{0}, wire{0};
  auto finish = [&](const LayoutFile& c) {
    std::lock_guard lock(mu);
    if (!write_all(journal.get(), journal_line(c))) throw sys_error(what + ": writing its journal");
  };
  // What an earlier attempt wrote at `c` goes: the zeros this one skips must read as zeros.
  auto clear = [&](const LayoutFile& c, int fd) {
    return c.size == 0 || ::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(c.offset),
                                      static_cast<off_t>(c.size)) == 0;
  };
  run_streams(todo.size(), opts.streams, opts.attempts, [&](std::size_t k) {
    const std::vector<const LayoutFile*>& places = *todo[k];
    const LayoutFile& c = *places.front();
    const int fd = fds.at(c.path).get();
    const bool holes = clear(c, fd);
    bool done = false;
    if (auto it = have.find(c.digest); it != have.end() && holes) {
      done = copy_earlier(it->second, fd, c.offset, c.digest, prog);
      if (done) reused += c.size;
    }
    if (!done) {
      std::uint64_t got = 0;
      auto place = [&](std::uint64_t at, const char* data, std::size_t n) {
        if (!holes || !all_zero(data, n))
          if (!write_all_at(fd, std::string_view(data, n), c.offset + at)) throw sys_error(what + ": writing " + c.path);
        prog.moved(n);
        got += n;
      };
      try {
        if (c.zstd_digest.empty()) {
          registry.get_blob(repo, c.digest, c.size, [&](std::uint64_t at, const char* data, std::size_t n) {
            place(at, data, n);
            wire += n;
          });
        } else {
          // The blob's digest is checked as it streams (get_blob), what it decodes to here.
          Sha256 sum;
          ZstdChunkWriter unpack(c.size, what + ": " + c.path + " at " + std::to_string(c.offset),
                                 [&](std::uint64_t at, const char* data, std::size_t n) {
                                   sum.update(data, n);
                                   place(at, data, n);
                                 });
          registry.get_blob(repo, c.zstd_digest, c.zstd_size, [&](std::uint64_t, const char* data, std::size_t n) {
            unpack.write(data, n);
            wire += n;
          });
          unpack.finish();
          if (const std::string d = sum.finish(); d != c.digest)
            throw Error(Code::DataLoss, what + ": " + c.path + " at " + std::to_string(c.offset) + " decompressed to " + d +
                                            ", the manifest says " + c.digest);
        }
      } catch (...) {
        prog.unmoved(got);
        throw;
      }
    }
    finish(c);
    for (std::size_t i = 1; i < places.size(); ++i) {
      const LayoutFile& other = *places[i];
      const int ofd = fds.at(other.path).get();
      if (!clear(other, ofd) ||
          !copy_earlier({.path = (dir / c.path).string(), .digest = c.digest, .size = c.size, .offset = c.offset}, ofd,
                        other.offset, c.digest, prog))
        throw Error(Code::Internal, what + ": copying " + c.path + " at " + std::to_string(c.offset) + " to " + other.path);
      finish(other);
    }
  });
  out.reused = reused;
  out.fetched = prog.moved_bytes();
  out.wire = wire;
  out.summary = prog.finish("fetched");
  if (out.wire != out.fetched) out.summary += ", " + human_bytes(out.wire) + " of it downloaded (zstd)";
  fs::remove(dir / kJournal);
  return out;
}

}  // namespace nvproxy::checkpoint
