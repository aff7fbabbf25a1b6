// How much of a second checkpoint image a push would send, given the first already in the registry,
// for several largest-chunk sizes (issue 47's "under 5 %" goal): each size cuts both images with the
// shim's own plan_chunks and counts the new image's bytes in chunks whose digest the old image lacks
// (each digest once, as a push sends it). Beside it, the floor no chunking can beat: the new image's
// 4 KiB pages whose content appears nowhere in the old one. Per file at the first size, so a
// change can be placed (which process's pages-N.img, the heap or the device staging).
//   chunk_reuse OLD_DIR NEW_DIR [--sizes-mib 64,32,16,8] [--threads N]   prints markdown tables
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_set>
#include <vector>

#include "checkpoint/registry/chunk_plan.h"
#include "common/error.h"
#include "common/unique_fd.h"

namespace fs = std::filesystem;
using namespace nvproxy;
using namespace nvproxy::checkpoint;

namespace {

constexpr std::size_t kPage = 4096;

struct FilePages {
  std::string path;                   // relative
  std::vector<std::uint64_t> hashes;  // one per whole page, in file order
};

// A fast non-cryptographic hash of every whole page of every regular file under `dir`; `threads`
// files at once. 64 bits: a collision among a few million pages is not a concern for a floor.
std::vector<FilePages> page_hashes(const fs::path& dir, int threads) {
  std::vector<FilePages> files;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) files.push_back({fs::relative(e.path(), dir).string(), {}});
  }
  std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  std::atomic<std::size_t> next{0};
  std::vector<std::string> errors(files.size());
  auto work = [&] {
    std::vector<char> buf(std::size_t{8} << 20);
    for (std::size_t i; (i = next++) < files.size();) {
      UniqueFd fd(::open((dir / files[i].path).c_str(), O_RDONLY | O_CLOEXEC));
      if (!fd) {
        errors[i] = files[i].path + ": " + std::strerror(errno);
        continue;
      }
      for (;;) {
        ssize_t n = ::read(fd.get(), buf.data(), buf.size());
        if (n <= 0) break;
        for (std::size_t off = 0; off + kPage <= static_cast<std::size_t>(n); off += kPage) {
          files[i].hashes.push_back(std::hash<std::string_view>{}(std::string_view(buf.data() + off, kPage)));
        }
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < std::max(1, threads); ++t) pool.emplace_back(work);
  for (auto& t : pool) t.join();
  for (const auto& e : errors) {
    if (!e.empty()) throw Error(Code::Internal, "reading " + e);
  }
  return files;
}

std::vector<std::uint64_t> parse_sizes(const std::string& s) {
  std::vector<std::uint64_t> out;
  for (std::size_t pos = 0; pos <= s.size();) {
    std::size_t comma = s.find(',', pos);
    if (comma == std::string::npos) comma = s.size();
    out.push_back(std::stoull(s.substr(pos, comma - pos)));
    pos = comma + 1;
  }
  return out;
}

double pct(std::uint64_t a, std::uint64_t b) {
  return b == 0 ? 0.0 : 100.0 * static_cast<double>(a) / static_cast<double>(b);
}
double mib(std::uint64_t b) {
  return static_cast<double>(b) / (1 << 20);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::vector<std::string> dirs;
  std::string sizes = "64,32,16,8";
  int threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 32u));
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--sizes-mib" && i + 1 < args.size()) {
      sizes = args[++i];
    } else if (args[i] == "--threads" && i + 1 < args.size()) {
      threads = std::stoi(args[++i]);
    } else {
      dirs.push_back(args[i]);
    }
  }
  if (dirs.size() != 2) {
    std::fprintf(stderr, "usage: chunk_reuse OLD_DIR NEW_DIR [--sizes-mib 64,32,16,8] [--threads N]\n");
    return 2;
  }
  try {
    auto t0 = std::chrono::steady_clock::now();
    // The floor: pages of the new image found nowhere in the old one.
    std::unordered_set<std::uint64_t> old_pages;
    for (const auto& f : page_hashes(dirs[0], threads)) old_pages.insert(f.hashes.begin(), f.hashes.end());
    std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> per_file;  // path: new-page bytes, bytes
    std::uint64_t floor_bytes = 0;
    for (const auto& f : page_hashes(dirs[1], threads)) {
      auto& [fresh, all] = per_file[f.path];
      for (auto h : f.hashes) {
        if (!old_pages.contains(h)) fresh += kPage;
      }
      all = fs::file_size(fs::path(dirs[1]) / f.path);
      floor_bytes += fresh;
    }
    std::uint64_t total = 0;
    for (const auto& [p, v] : per_file) total += v.second;
    std::printf("new image %.0f MiB in %zu files; pages found nowhere in the old image: %.1f MiB (%.2f %%), the floor\n\n",
                mib(total), per_file.size(), mib(floor_bytes), pct(floor_bytes, total));

    std::printf("| largest chunk MiB | chunks | average MiB | sent MiB | sent %% |\n| ---: | ---: | ---: | ---: | ---: |\n");
    std::map<std::string, std::uint64_t> first_sent;  // per file, at the first size
    bool first = true;
    for (auto size_mib : parse_sizes(sizes)) {
      ChunkOptions opts{.max_bytes = size_mib << 20, .threads = threads};
      std::unordered_set<std::string> held;
      for (const auto& c : plan_chunks(dirs[0], opts)) held.insert(c.digest);
      auto chunks = plan_chunks(dirs[1], opts);
      std::uint64_t sent = 0;
      for (const auto& c : chunks) {
        if (held.insert(c.digest).second) {
          sent += c.size;
          if (first) first_sent[c.path] += c.size;
        }
      }
      std::printf("| %llu | %zu | %.1f | %.1f | %.2f |\n", static_cast<unsigned long long>(size_mib), chunks.size(),
                  chunks.empty() ? 0.0 : mib(total) / static_cast<double>(chunks.size()), mib(sent), pct(sent, total));
      std::fflush(stdout);
      first = false;
    }
    std::printf("\n| file | MiB | new pages MiB | sent at %s MiB |\n| --- | ---: | ---: | ---: |\n",
                sizes.substr(0, sizes.find(',')).c_str());
    for (const auto& [p, v] : per_file) {
      if (v.second < (1u << 20) && v.first == 0) continue;  // CRIU's small files: noise in the table
      std::printf("| %s | %.1f | %.1f | %.1f |\n", p.c_str(), mib(v.second), mib(v.first), mib(first_sent[p]));
    }
    std::printf("\n(%.1f s)\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "chunk_reuse: %s\n", e.what());
    return 1;
  }
  return 0;
}
