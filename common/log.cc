#include "common/log.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>

#include "common/error.h"
#include "common/text.h"

namespace nvproxy {

LogLevel parse_log_level(std::string_view s) {
  if (s == "debug" || s == "trace") return LogLevel::Debug;
  if (s == "info") return LogLevel::Info;
  if (s == "warn" || s == "warning") return LogLevel::Warn;
  if (s == "error") return LogLevel::Error;
  throw Error(Code::InvalidArgument, "unknown log level \"" + std::string(s) + "\"");
}

void Logger::set_fd(int fd) {
  std::lock_guard lk(mu_);
  fd_ = fd;
}

void Logger::set_field(const std::string& key, const std::string& value) {
  std::lock_guard lk(mu_);
  fields_ += " " + key + "=" + value;
}

namespace {
std::string quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {  // \r, ESC ...: one record, no terminal tricks
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\x%02x", static_cast<unsigned char>(c));
      out += esc;
      continue;
    }
    out += c;
  }
  return out + "\"";
}
}  // namespace

void Logger::log(LogLevel l, std::string_view msg) {
  static constexpr const char* kNames[] = {"debug", "info", "warning", "error"};
  if (l < level_) return;
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() % 1000000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char ts[64];
  std::strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
  std::string line = "time=\"" + std::string(ts) + "." + std::to_string(1000000 + us).substr(1) +
                     "Z\" level=" + kNames[static_cast<int>(l)] +
                     " msg=" + quote(valid_utf8(msg));  // a record is valid UTF-8 whatever it quotes
  std::lock_guard lk(mu_);
  line += fields_ + "\n";
  if (fd_ < 0) return;
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace nvproxy
