#include "checkpoint/image/criu_stats.h"

#include <cstdio>

#include "checkpoint/image/criu_image.h"
#include "common/error.h"

namespace nvproxy::checkpoint {

namespace {

// CRIU's stats.proto: stats_entry { dump = 1; restore = 2 }.
constexpr int kDump = 1, kRestore = 2;
constexpr std::uint64_t kPage = 4096;

std::string seconds(double ms) {
  char b[32];
  if (ms < 1000)
    std::snprintf(b, sizeof b, "%.0f ms", ms);
  else
    std::snprintf(b, sizeof b, "%.1f s", ms / 1000);
  return b;
}

std::string gib(std::uint64_t pages) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f GiB", static_cast<double>(pages * kPage) / (1u << 30));
  return b;
}

double ms_of(const criu::Fields& f, int field) {
  return static_cast<double>(f.number(field)) / 1000.0;  // CRIU counts microseconds
}

}  // namespace

std::optional<CriuStats> read_criu_stats(const std::filesystem::path& work_dir, const std::string& what) {
  const auto file = work_dir / ("stats-" + what);
  auto entries = criu::read_entries(file, criu::kStatsMagic, true);
  if (entries.empty()) return std::nullopt;
  const criu::Fields top = criu::Fields::parse(entries.front(), file.string());
  CriuStats s;
  if (what == "dump") {
    if (!top.has(kDump)) return std::nullopt;
    const criu::Fields d = criu::Fields::parse(top.bytes(kDump), file.string() + " (dump)");
    // dump_stats_entry: freezing_time 1, frozen_time 2, memdump_time 3, memwrite_time 4,
    // pages_scanned 5, pages_written 7.
    s.timings = {{"criu_freezing", ms_of(d, 1)},
                 {"criu_frozen", ms_of(d, 2)},
                 {"criu_memdump", ms_of(d, 3)},
                 {"criu_memwrite", ms_of(d, 4)}};
    s.pages_scanned = d.number(5);
    s.pages_written = d.number(7);
  } else {
    if (!top.has(kRestore)) return std::nullopt;
    const criu::Fields r = criu::Fields::parse(top.bytes(kRestore), file.string() + " (restore)");
    // restore_stats_entry: forking_time 3, restore_time 4, pages_restored 5.
    s.timings = {{"criu_forking", ms_of(r, 3)}, {"criu_restore", ms_of(r, 4)}};
    s.pages_restored = r.number(5);
  }
  return s;
}

std::string criu_stats_text(const CriuStats& s) {
  auto ms = [&](const std::string& name) {
    for (const auto& t : s.timings)
      if (t.name == name) return t.ms;
    return 0.0;
  };
  if (s.pages_restored > 0 || ms("criu_restore") > 0)
    return "CRIU: restore " + seconds(ms("criu_restore")) + " (forking " + seconds(ms("criu_forking")) + "), " +
           gib(s.pages_restored) + " of pages";
  std::string text = "CRIU: frozen " + seconds(ms("criu_frozen")) + " (freezing " + seconds(ms("criu_freezing")) +
                     "), memory dump " + seconds(ms("criu_memdump")) + ", page write " + seconds(ms("criu_memwrite")) + ": " +
                     gib(s.pages_written) + " written of " + gib(s.pages_scanned) + " scanned";
  if (const double w = ms("criu_memwrite"); w > 0 && s.pages_written > 0) {
    char b[48];
    std::snprintf(b, sizeof b, ", written at %.2f GiB/s", static_cast<double>(s.pages_written * kPage) / (1u << 30) / (w / 1000));
    text += b;
  }
  return text;
}

}  // namespace nvproxy::checkpoint
