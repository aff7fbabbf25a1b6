// What a checkpoint or restore holds while the driver's staging lives in host memory: its share
// of the host's reservations and the memory limits it lifted. Taken after the plan said yes,
// before anything is toggled; ended (limits put back, reservation let go) once every process is
// back on the GPU, and by its destructor on every other way out.
#pragma once

#include <filesystem>
#include <string>

#include "checkpoint/staging/host_reservations.h"
#include "checkpoint/staging/limit_lift.h"
#include "checkpoint/staging/memory_limits.h"
#include "checkpoint/staging/staging_bill.h"
#include "common/log.h"

namespace nvproxy::checkpoint {

struct StagingHold {
  // Declared first, destroyed last: the limits go back before the reservation is let go.
  HostReservations::Held reservation;
  LimitLift lift;

  void end() {
    lift.put_back();
    reservation.release();
  }
};

struct StagingSite {
  MemoryProbe* probe = nullptr;
  HostReservations* reservations = nullptr;  // null: no host-wide account (each shim counts alone)
  std::filesystem::path record;              // where the lifted limits' originals are kept
};

// What the other checkpoints and restores in flight have reserved, into the bill (checkpoint and
// restore alike). "" or why the account could not be read: the bill then stands on the rest.
std::string bill_reservations(StagingBill& bill, HostReservations* reservations, const std::string& container);

// Reserves plan.reserve on the host, checked again under the account's lock against what others
// hold now (one may have started since the plan), then lifts plan.lifts. Throws
// Error(FailedPrecondition) with the figures when the host's room is gone, or a lift fails.
StagingHold hold_staging(const StagingPlan& plan, const StagingBill& bill, const StagingSite& site, const std::string& container,
                         const std::string& what, Logger& log);

}  // namespace nvproxy::checkpoint
