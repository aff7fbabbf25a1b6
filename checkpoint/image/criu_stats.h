// Where CRIU's own time went: the stats file it leaves in its work directory after a dump
// (stats-dump: how long the tree was being frozen and stayed frozen, the memory dump and the page
// write, pages scanned and written) and a restore (stats-restore: forking, the restore, pages
// restored). The session adds them to the checkpoint's and the restore's phases, so that the log,
// the diagnostic and the image's record say how much of a snapshot was CRIU's page I/O.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace nvproxy::checkpoint {

struct CriuStats {
  struct Timing {
    std::string name;  // criu_freezing, criu_frozen, criu_memdump, criu_memwrite; criu_forking, criu_restore
    double ms = 0;
  };
  std::vector<Timing> timings;
  std::uint64_t pages_scanned = 0, pages_written = 0;  // dump: 4 KiB pages
  std::uint64_t pages_restored = 0;                    // restore
};

// WORK/stats-dump or WORK/stats-restore (`what`: "dump" or "restore"); nullopt when CRIU left none
// (runsc, a CRIU run without a work directory). Throws Error(InvalidArgument) naming the file when
// it is malformed.
std::optional<CriuStats> read_criu_stats(const std::filesystem::path& work_dir, const std::string& what);

// "CRIU: frozen 3.1 s (freezing 12 ms), memory dump 2.0 s, page write 1.0 s: 1.0 GiB written of
// 4.0 GiB scanned, 1.0 GiB/s" or for a restore "CRIU: restore 3.0 s (forking 20 ms), 4.0 GiB of pages".
std::string criu_stats_text(const CriuStats& s);

}  // namespace nvproxy::checkpoint
