#include "checkpoint/staging/staging_bill.h"

#include "checkpoint/facts/gpu_facts.h"
#include "common/error.h"
#include "common/number.h"

namespace nvproxy::checkpoint {

namespace {
constexpr std::uint64_t kPage = 4096;
std::uint64_t page_up(std::uint64_t v) {
  return (v + kPage - 1) / kPage * kPage;
}
std::string limit_text(std::uint64_t v) {
  return v == kNoLimit ? "none" : format_bytes(v);
}
}  // namespace

StagingMode parse_staging_mode(const std::string& text) {
  if (text == "lift") return StagingMode::Lift;
  if (text == "refuse") return StagingMode::Refuse;
  throw Error(Code::InvalidArgument, "checkpoint.staging_memory: \"" + text + "\" is neither lift nor refuse");
}

std::string to_string(StagingMode m) {
  return m == StagingMode::Lift ? "lift" : "refuse";
}

std::uint64_t StagingBill::total() const {
  std::uint64_t t = 0;
  for (const auto& [_, b] : staged) t += b;
  return t;
}

std::string staged_text(const std::map<pid_t, std::uint64_t>& staged, bool in_sandbox) {
  std::string s;
  for (const auto& [pid, b] : staged)
    s += (s.empty() ? "" : ", ") + (in_sandbox && pid == StagingBill::kSandboxToCome
                                        ? format_bytes(b)
                                        : (in_sandbox ? "host pid " : "pid ") + std::to_string(pid) + ": " + format_bytes(b));
  return (in_sandbox ? "the sandbox's memory (" : "the processes' memory (") + s + ")";
}

std::string staging_text(const nlohmann::json& j) {
  if (!j.is_object() || j.value("staged_bytes", std::uint64_t{0}) == 0) return "";
  std::map<pid_t, std::uint64_t> staged;
  const nlohmann::json by_pid = j.value("staged_by_pid", nlohmann::json::object());
  for (const auto& [pid, b] : by_pid.items())
    staged[parse_number_or_throw<pid_t>(pid, "staged_by_pid: pid")] = b.get<std::uint64_t>();
  std::string out = "staging: the driver stages " + format_bytes(j.value("staged_bytes", std::uint64_t{0})) +
                    " of device memory in " + staged_text(staged, j.value("in_sandbox", false)) +
                    "; host: " + format_bytes(j.value("host_available", std::uint64_t{0})) + " available";
  if (auto others = j.value("host_reserved_by_others", std::uint64_t{0}); others > 0)
    out += ", " + format_bytes(others) + " reserved by other checkpoints";
  out += "; mode " + j.value("mode", std::string("lift")) + "\n";
  const nlohmann::json limits = j.value("limits", nlohmann::json::array());
  for (const auto& l : limits) {
    out += "  " + l.value("cgroup", std::string()) + "/" + l.value("file", std::string()) + " " +
           format_bytes(l.value("limit", std::uint64_t{0})) + ": " + format_bytes(l.value("headroom", std::uint64_t{0})) +
           " free";
    if (l.contains("lifted_to"))
      out += ", crossed: lifted to " + format_bytes(l["lifted_to"].get<std::uint64_t>()) + " for the staging";
    out += "\n";
  }
  return out;
}

StagingPlan plan_staging(const StagingBill& bill, StagingMode mode, const std::string& what) {
  StagingPlan p;
  const std::uint64_t total = bill.total(), need = bill.need();
  nlohmann::json per = nlohmann::json::object();
  for (const auto& [pid, b] : bill.staged) per[std::to_string(pid)] = b;
  p.json = {{"mode", to_string(mode)},
            {"staged_bytes", total},
            {"staged_by_pid", per},
            {"in_sandbox", bill.in_sandbox},
            {"margin_bytes", bill.margin},
            {"resident_bytes", bill.resident},
            {"host_available", bill.host_available},
            {"host_reserved_by_others", bill.reserved_by_others},
            {"limits", nlohmann::json::array()}};
  if (!bill.others.empty()) p.json["host_reserved_by"] = bill.others;
  if (total == 0) return p;
  const std::string staging =
      "the driver stages " + format_bytes(total) + " of device memory in " + staged_text(bill.staged, bill.in_sandbox);

  // The host first: no lift makes room there.
  std::uint64_t free_host = bill.host_available > bill.reserved_by_others ? bill.host_available - bill.reserved_by_others : 0;
  if (need > free_host) {
    p.refused = true;
    p.reason = "the " + what + " would run the host out of memory: " + staging + ", plus a margin of " +
               format_bytes(bill.margin) +
               (bill.resident ? " and " + format_bytes(bill.resident) + " of other process memory" : "") + ", but the host has " +
               format_bytes(bill.host_available) + " available (MemAvailable)";
    if (bill.reserved_by_others > 0) {
      p.reason +=
          " of which " + format_bytes(bill.reserved_by_others) + " are reserved by other checkpoints and restores in flight";
      std::string who;
      for (const auto& o : bill.others) who += (who.empty() ? "" : ", ") + o;
      p.reason += " (" + who + ")";
    }
    p.reason += "; nothing was toggled";
    return p;
  }
  p.reserve = need;

  std::vector<std::string> short_of;
  for (const auto& l : bill.limits) {
    bool crossed = l.headroom() < need;
    nlohmann::json j = {{"cgroup", l.cgroup.string()},  {"file", l.file},           {"limit", l.limit},  {"usage", l.usage},
                        {"reclaimable", l.reclaimable}, {"headroom", l.headroom()}, {"crossed", crossed}};
    if (crossed) {
      std::uint64_t to = page_up(l.used() + need);
      j["lifted_to"] = to;
      short_of.push_back(l.cgroup.string() + "/" + l.file + " " + format_bytes(l.limit) + " with " + format_bytes(l.headroom()) +
                         " free (" + format_bytes(l.usage) + " used, " + format_bytes(l.reclaimable) +
                         " of it reclaimable cache)");
      // v1: the memory+swap limit may not fall below the memory limit: raised first, by as much.
      if (!l.swap_file.empty() && l.swap_limit != kNoLimit)
        p.lifts.push_back(
            {.file = l.cgroup / l.swap_file, .from = l.swap_limit, .to = l.swap_limit + (to - l.limit), .cgroup = {}});
      p.lifts.push_back({.file = l.path(), .from = l.limit, .to = to, .cgroup = l.cgroup});
    }
    p.json["limits"].push_back(std::move(j));
  }
  if (!short_of.empty() && mode == StagingMode::Refuse) {
    p.refused = true;
    p.lifts.clear();
    p.reserve = 0;
    std::string where;
    for (const auto& s : short_of) where += (where.empty() ? "" : "; ") + s;
    p.reason = "the " + what + " would cross the container's memory limit: " + staging + ", plus a margin of " +
               format_bytes(bill.margin) + ", but " + where +
               "; checkpoint.staging_memory is refuse (lift raises such limits while the device memory is in host "
               "memory); nothing was toggled";
  }
  for (const auto& c : p.lifts)
    p.json["lifts"].push_back({{"file", c.file.string()}, {"from", limit_text(c.from)}, {"to", limit_text(c.to)}});
  return p;
}

}  // namespace nvproxy::checkpoint
