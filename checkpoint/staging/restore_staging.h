// The driver's staging on restore: CRIU writes the image's pages (the staged device memory among
// them) into the container's new memory cgroup, with the same limit as the checkpointed one, and
// the driver then moves the device memory back to the GPU. Billed before anything is created, as
// a checkpoint is (staging_bill.h): refused when the host has no room (or a limit would be crossed
// under checkpoint.staging_memory: refuse); else the limits in the way are lifted, the container's
// own through its spec (the runtime creates its cgroup lifted; the spec is put back as it was once
// the runtime's restore returned), its ancestors' directly, all put back once CUDA is resumed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "checkpoint/image/image_record.h"
#include "checkpoint/staging/staging_hold.h"
#include "common/log.h"

namespace nvproxy::checkpoint {

struct RestoreStagingInput {
  std::string container;
  std::filesystem::path bundle;  // config.json, and the lift's record
  std::filesystem::path image;   // CRIU's page files
  const ImageRecord* record = nullptr;
  StagingMode mode = StagingMode::Lift;
  std::uint64_t margin = 0;
};

// Sum of the image's page files (CRIU's pages-*.img, runsc's memory file pages.img): what the
// restore writes into memory.
std::uint64_t image_page_bytes(const std::filesystem::path& image);

class RestoreStaging {
 public:
  RestoreStaging() = default;
  // Throws Error(FailedPrecondition) with the figures when refused; nothing is changed then.
  RestoreStaging(const RestoreStagingInput& in, MemoryProbe& probe, HostReservations* reservations, Logger& log);
  RestoreStaging(RestoreStaging&&) = default;
  RestoreStaging& operator=(RestoreStaging&&) = default;
  RestoreStaging(const RestoreStaging&) = delete;
  RestoreStaging& operator=(const RestoreStaging&) = delete;
  ~RestoreStaging() { spec_back(); }

  // The runtime's restore returned (either way): the spec says what the container asked for again.
  void spec_back() noexcept;
  // CUDA is back in every process: the limits go back, the reservation is let go.
  void end() {
    spec_back();
    hold_.end();
  }
  // "" or the kernel's reason for processes killed during the restore (oom_cause), with what the
  // restore was billed and which limits were lifted to what.
  [[nodiscard]] std::string oom_cause_now() const;

 private:
  std::filesystem::path spec_;
  std::string spec_text_;  // config.json as it was; empty: not edited
  StagingHold hold_;
  MemoryProbe* probe_ = nullptr;  // null: nothing billed, no OOM counts
  OomBaseline oom_;               // the container's new cgroup counts from 0
  bool sandbox_ = false;          // a gVisor sandbox's restore
  std::string billed_;            // the bill and the lifts, for a failure's message
};

}  // namespace nvproxy::checkpoint
