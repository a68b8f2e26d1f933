#include "base/log.h"

#include <algorithm>

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

#include "base/error.h"

namespace brine::base {

std::optional<spdlog::level::level_enum> parse_log_level(const std::string& name) {
  using spdlog::level::level_enum;
  if (name == "garbage" || name == "trace" || name == "all") return level_enum::trace;
  if (name == "debug") return level_enum::debug;
  if (name == "info" || name == "profile") return level_enum::info;
  if (name == "warning" || name == "warn") return level_enum::warn;
  if (name == "error") return level_enum::err;
  if (name == "critical") return level_enum::critical;
  if (name == "quiet") return level_enum::off;
  return std::nullopt;
}

void init_logging(const std::string& file, spdlog::level::level_enum level,
                  const std::string& name) {
  std::shared_ptr<spdlog::logger> logger;
  if (file.empty()) {
    logger = std::make_shared<spdlog::logger>(name, std::make_shared<spdlog::sinks::stderr_sink_mt>());
  } else {
    try {
      logger = std::make_shared<spdlog::logger>(
          name, std::make_shared<spdlog::sinks::basic_file_sink_mt>(file, false));
    } catch (const spdlog::spdlog_ex& e) {
      throw error("log_file " + file + ": cannot open for writing (" + e.what() +
                  "); fix the path or its permissions");
    }
  }
  logger->set_pattern("%Y-%m-%d %H:%M:%S.%e [%n] [%l] %v");
  logger->set_level(level);
  // Every line that is logged reaches the file at once (a daemon run at
  // debug is being watched, and the benchmark counts its lines while it runs).
  logger->flush_on(std::min(level, spdlog::level::info));
  spdlog::set_default_logger(std::move(logger));
}

}  // namespace brine::base
