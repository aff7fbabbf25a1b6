// system_clock time points as protobuf Timestamps (exited_at, event envelopes).
#pragma once

#include "proto/wkt.pb.h"

#include <chrono>

namespace nvproxy::shim {

inline void set_time(wkt::Timestamp* ts, std::chrono::system_clock::time_point t) {
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  ts->set_seconds(ns / 1000000000);
  ts->set_nanos(static_cast<int>(ns % 1000000000));
}

}  // namespace nvproxy::shim
