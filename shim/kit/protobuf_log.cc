#include "shim/kit/protobuf_log.h"

#include <google/protobuf/stubs/logging.h>

#include <atomic>
#include <string>

namespace nvproxy::shim {

namespace {

std::atomic<Logger*> g_log{nullptr};

void to_logger(google::protobuf::LogLevel level, const char* file, int line, const std::string& message) {
  Logger* log = g_log.load();
  if (!log) return;
  // FATAL aborts in libprotobuf after the handler; the rest is about input we were given.
  LogLevel l = level >= google::protobuf::LOGLEVEL_ERROR ? LogLevel::Warn : LogLevel::Debug;
  log->log(l, "libprotobuf (" + std::string(file ? file : "?") + ":" + std::to_string(line) + "): " + message);
}

}  // namespace

void route_protobuf_log(Logger* log) {
  g_log.store(log);
  google::protobuf::SetLogHandler(&to_logger);
}

}  // namespace nvproxy::shim
