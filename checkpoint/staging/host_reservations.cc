#include "checkpoint/staging/host_reservations.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#include <csignal>

#include <cerrno>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>

#include "checkpoint/facts/gpu_facts.h"
#include "checkpoint/process/process_holds.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/unique_fd.h"

namespace nvproxy::checkpoint {

namespace fs = std::filesystem;

namespace {

constexpr std::chrono::seconds kLockWait{10};

// The lock: a file of its own beside the account, so that the account is replaced atomically.
class FileLock {
 public:
  explicit FileLock(const fs::path& account) {
    std::error_code ec;
    fs::create_directories(account.parent_path(), ec);
    fs::path lock = account;
    lock += ".lock";
    fd_.reset(::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
    if (!fd_) throw sys_error("open the host's staging reservations lock " + lock.string());
    // Held for a read and a write at a time; one held longer (a stopped shim) is not waited out.
    const auto deadline = std::chrono::steady_clock::now() + kLockWait;
    while (::flock(fd_.get(), LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK && errno != EINTR) throw sys_error("lock " + lock.string());
      if (std::chrono::steady_clock::now() >= deadline)
        throw Error(Code::DeadlineExceeded, "the lock " + lock.string() + " was held by another shim for over " +
                                                std::to_string(kLockWait.count()) + " s");
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // flock has no timed wait
    }
  }

 private:
  UniqueFd fd_;  // closing it lets the lock go
};

bool alive(const Reservation& r) {
  if (r.shim <= 0 || (::kill(r.shim, 0) != 0 && errno == ESRCH)) return false;
  return process_start_time(r.shim) == r.shim_start;
}

std::vector<Reservation> load(const fs::path& file) {
  std::vector<Reservation> out;
  std::error_code ec;
  if (!fs::exists(file, ec)) return out;
  try {
    for (const auto& e : nlohmann::json::parse(read_file(file)))
      out.push_back({.shim = e.at("shim").get<pid_t>(),
                     .shim_start = e.at("shim_start").get<unsigned long long>(),
                     .container = e.at("container").get<std::string>(),
                     .what = e.value("what", "checkpoint"),
                     .bytes = e.at("bytes").get<std::uint64_t>()});
  } catch (const nlohmann::json::exception&) {
    // A torn or foreign file is dropped: the live shims write their entries again at their next call.
    return {};
  }
  return out;
}

void save(const fs::path& file, const std::vector<Reservation>& rs) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& r : rs)
    j.push_back(
        {{"shim", r.shim}, {"shim_start", r.shim_start}, {"container", r.container}, {"what", r.what}, {"bytes", r.bytes}});
  write_file_atomic(file, j.dump(1) + "\n", 0600);
}

bool same(const Reservation& a, const Reservation& b) {
  return a.shim == b.shim && a.container == b.container;
}

}  // namespace

std::string describe(const Reservation& r) {
  return "container \"" + r.container + "\" (" + r.what + ", " + format_bytes(r.bytes) + ", shim pid " + std::to_string(r.shim) +
         ")";
}

HostReservations::Held& HostReservations::Held::operator=(Held&& o) noexcept {
  if (this != &o) {
    release();
    owner_ = std::exchange(o.owner_, nullptr);
    r_ = std::move(o.r_);
  }
  return *this;
}

void HostReservations::Held::release() noexcept {
  if (owner_) std::exchange(owner_, nullptr)->remove(r_);
}

std::vector<Reservation> HostReservations::others(const std::string& container) {
  FileLock lk(file_);
  std::vector<Reservation> out;
  Reservation me{.shim = ::getpid(), .container = container};
  for (auto& r : load(file_))
    if (alive(r) && !same(r, me)) out.push_back(std::move(r));
  return out;
}

HostReservations::Held HostReservations::reserve(
    const std::string& container, const std::string& what,
    const std::function<std::optional<std::uint64_t>(std::uint64_t, const std::vector<Reservation>&)>& decide) {
  FileLock lk(file_);
  Reservation me{.shim = ::getpid(), .shim_start = process_start_time(::getpid()), .container = container, .what = what};
  std::vector<Reservation> live, others;
  std::uint64_t held = 0;
  for (auto& r : load(file_)) {
    if (!alive(r) || same(r, me)) continue;  // a dead shim's entry, or our own stale one
    held += r.bytes;
    others.push_back(r);
    live.push_back(std::move(r));
  }
  std::optional<std::uint64_t> bytes = decide(held, others);
  if (!bytes || *bytes == 0) {
    save(file_, live);
    return {};
  }
  me.bytes = *bytes;
  live.push_back(me);
  save(file_, live);
  return {this, me};
}

void HostReservations::remove(const Reservation& r) noexcept {
  try {
    FileLock lk(file_);
    std::vector<Reservation> keep;
    for (auto& e : load(file_))
      if (!same(e, r) && alive(e)) keep.push_back(std::move(e));
    save(file_, keep);
  } catch (const std::exception&) {
    // The entry dies with this shim at the latest: the next reader drops it.
  }
}

}  // namespace nvproxy::checkpoint
