#include "checkpoint/staging/staging_hold.h"

#include "checkpoint/facts/gpu_facts.h"
#include "common/error.h"

namespace nvproxy::checkpoint {

std::string bill_reservations(StagingBill& bill, HostReservations* reservations, const std::string& container) {
  if (!reservations) return "";
  try {
    for (const auto& r : reservations->others(container)) {
      bill.reserved_by_others += r.bytes;
      bill.others.push_back(describe(r));
    }
  } catch (const std::exception& e) {
    return std::string("the host's staging account cannot be read (") + e.what() +
           "): other checkpoints in flight are not counted";
  }
  return "";
}

StagingHold hold_staging(const StagingPlan& plan, const StagingBill& bill, const StagingSite& site, const std::string& container,
                         const std::string& what, Logger& log) {
  StagingHold h;
  const std::string who = what + " of \"" + container + "\"";
  if (site.reservations && plan.reserve > 0) {
    std::string refused;
    try {
      h.reservation = site.reservations->reserve(
          container, what, [&](std::uint64_t others, const std::vector<Reservation>& by) -> std::optional<std::uint64_t> {
            std::uint64_t available = bill.host_available;
            try {
              if (site.probe) available = site.probe->host_available();
            } catch (const std::exception&) {
            }
            if (others + plan.reserve <= available) return plan.reserve;
            std::string names;
            for (const auto& r : by) names += (names.empty() ? "" : ", ") + describe(r);
            refused = "the " + what + " would run the host out of memory: it stages " + format_bytes(plan.reserve) +
                      " (with its margin) in host memory, the host has " + format_bytes(available) +
                      " available (MemAvailable), and other checkpoints and restores in flight have reserved " +
                      format_bytes(others) + " (" + names + "); nothing was toggled, retry once they are done";
            return std::nullopt;
          });
    } catch (const Error& e) {
      // The account itself is unusable (a read-only /run): this staging goes ahead on its own bill.
      log.warn(who + ": the host's staging account " + site.reservations->file().string() + " cannot be used: " + e.what() +
               "; nothing reserved there");
    }
    if (!refused.empty()) throw Error(Code::FailedPrecondition, refused);
    log.debug(who + ": " + format_bytes(plan.reserve) + " reserved in the host's staging account " +
              site.reservations->file().string());
  }
  if (!plan.lifts.empty() && site.probe) h.lift = LimitLift(*site.probe, plan.lifts, site.record, log, who);
  return h;
}

}  // namespace nvproxy::checkpoint
