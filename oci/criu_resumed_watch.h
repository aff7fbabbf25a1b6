// Told when CRIU runs a leave-running checkpoint's processes again before it has written their
// pages (the project's CRIU: --resumed-fifo).
//
// The shim stops more of a GPU container than CRIU freezes: CUDA stays checkpointed until the shim
// resumes it. With --resumed-fifo, CRIU's page writers first hold the processes' pages in their own
// memory, CRIU resumes the processes and writes one byte into a FIFO, and only then writes the
// pages out (the disk, and the host's dirty-page limit, no longer stop the workload). This watch
// owns that FIFO for one runtime call: it calls `resumed` (once, on its own thread) when the byte
// comes, and the destructor stops it and joins, whether the byte came or not (a byte already
// written when the destructor runs is still told).
//
// With a gate (the project's CRIU: --write-gate), CRIU writes the held pages only once `resumed`
// has returned: the watch then writes a byte into the gate's FIFO, which it holds open from the
// start (so that CRIU's wait ends at the latest when the watch goes, the shim with it). The
// writes into the page cache would otherwise compete with the driver copying a CUDA process's
// memory back to its device (a 24 GiB resume took 4.9 s instead of 4.1 s on an H100).
#pragma once

#include <filesystem>
#include <functional>
#include <thread>

#include "common/unique_fd.h"

namespace nvproxy::oci {

class CriuResumedWatch {
 public:
  // Makes the FIFO at `fifo` (replacing what is there), and the gate's at `gate` unless it is
  // empty, and starts watching. Throws Error on a FIFO that cannot be made or opened.
  CriuResumedWatch(std::filesystem::path fifo, std::filesystem::path gate, std::function<void()> resumed);
  CriuResumedWatch(const CriuResumedWatch&) = delete;
  CriuResumedWatch& operator=(const CriuResumedWatch&) = delete;
  ~CriuResumedWatch();

  [[nodiscard]] const std::filesystem::path& path() const { return fifo_; }
  [[nodiscard]] const std::filesystem::path& gate_path() const { return gate_path_; }

 private:
  void watch();
  void open_gate();

  std::filesystem::path fifo_;
  std::filesystem::path gate_path_;
  std::function<void()> resumed_;
  UniqueFd read_;  // the FIFO, read end
  UniqueFd gate_;  // the gate's FIFO, read and write (never blocks; its close is CRIU's hang-up)
  UniqueFd stop_;  // eventfd: the destructor's word
  std::thread thread_;
};

}  // namespace nvproxy::oci
