// system_clock time points as protobuf Timestamps (exited_at, event envelopes).
#pragma once

#include "proto/wkt.pb.h"

#include <chrono>
#include <cstdint>

namespace nvproxy::shim {

// Seconds from the Unix epoch back to 0001-01-01: Go's zero time.Time, which containerd's clients
// read as "no time" (IsZero).
inline constexpr int64_t kGoZeroTimeSeconds = -62135596800;

// A default time_point (the epoch) means "no time" and is written as Go's zero time, as
// containerd's runc shim writes an exit time it never had.
inline void set_time(wkt::Timestamp* ts, std::chrono::system_clock::time_point t) {
  if (t == std::chrono::system_clock::time_point{}) {
    ts->set_seconds(kGoZeroTimeSeconds);
    ts->set_nanos(0);
    return;
  }
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  ts->set_seconds(ns / 1000000000);
  ts->set_nanos(static_cast<int>(ns % 1000000000));
}

}  // namespace nvproxy::shim
