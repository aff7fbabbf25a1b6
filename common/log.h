// A small leveled logger. It is an object handed to whoever logs (no global logger): the shim
// points it at containerd's `log` FIFO, CLI commands at stderr. Lines use logrus' text format so
// containerd's own log shows them naturally.
#pragma once

#include <mutex>
#include <sstream>
#include <string>
#include <string_view>

namespace nvproxy {

enum class LogLevel { Debug = 0, Info = 1, Warn = 2, Error = 3 };

LogLevel parse_log_level(std::string_view s);  // throws Error(InvalidArgument)

class Logger {
 public:
  // fd is borrowed (not closed); -1 discards.
  explicit Logger(int fd = 2, LogLevel level = LogLevel::Info) : fd_(fd), level_(level) {}
  void set_fd(int fd);
  void set_level(LogLevel l) { level_ = l; }
  [[nodiscard]] LogLevel level() const { return level_; }
  void set_field(const std::string& key, const std::string& value);  // e.g. id=<container>, namespace=<ns>

  void log(LogLevel l, std::string_view msg);
  void debug(std::string_view m) { log(LogLevel::Debug, m); }
  void info(std::string_view m) { log(LogLevel::Info, m); }
  void warn(std::string_view m) { log(LogLevel::Warn, m); }
  void error(std::string_view m) { log(LogLevel::Error, m); }

 private:
  std::mutex mu_;
  int fd_;
  LogLevel level_;
  std::string fields_;
};

}  // namespace nvproxy
