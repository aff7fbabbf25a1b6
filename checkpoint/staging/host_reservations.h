// One host-wide account of the memory that checkpoints and restores in flight will stage, shared by
// every shim on the host: a JSON file under a lock (flock). Two checkpoints that each fit in the
// host's memory but not together do not both start: the second is refused at once, naming the
// first (a checkpoint's staging lasts seconds to minutes; a refusal the client can retry is better
// than a shim waiting with the container's operations blocked). An entry whose shim is gone (its
// pid dead, or reused by another process) no longer counts.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace nvproxy::checkpoint {

struct Reservation {
  pid_t shim = 0;
  unsigned long long shim_start = 0;  // the shim's start time (/proc/PID/stat): a reused pid is not it
  std::string container;
  std::string what;  // "checkpoint" | "restore"
  std::uint64_t bytes = 0;
};

class HostReservations {
 public:
  explicit HostReservations(std::filesystem::path file) : file_(std::move(file)) {}

  // A reservation held until destroyed (or released): its entry leaves the file then.
  class Held {
   public:
    Held() = default;
    Held(HostReservations* owner, Reservation r) : owner_(owner), r_(std::move(r)) {}
    Held(Held&& o) noexcept : owner_(std::exchange(o.owner_, nullptr)), r_(std::move(o.r_)) {}
    Held& operator=(Held&& o) noexcept;
    Held(const Held&) = delete;
    Held& operator=(const Held&) = delete;
    ~Held() { release(); }
    void release() noexcept;
    [[nodiscard]] bool held() const { return owner_ != nullptr; }

   private:
    HostReservations* owner_ = nullptr;
    Reservation r_;
  };

  // Under the lock: the live entries of others. Throws Error when the file cannot be used.
  std::vector<Reservation> others(const std::string& container);
  // Under one lock: `decide` gets what the others hold (bytes, their entries) and answers the bytes
  // to reserve (nullopt: none, refused); the entry is written before the lock is let go.
  Held reserve(const std::string& container, const std::string& what,
               const std::function<std::optional<std::uint64_t>(std::uint64_t, const std::vector<Reservation>&)>& decide);

  [[nodiscard]] const std::filesystem::path& file() const { return file_; }

 private:
  void remove(const Reservation& r) noexcept;
  std::filesystem::path file_;
};

// "container \"llm\" (checkpoint, 12.0 GiB)".
std::string describe(const Reservation& r);

}  // namespace nvproxy::checkpoint
