#pragma once

#include <optional>
#include <string>

#include <spdlog/spdlog.h>

namespace brine::base {

// Salt's level names (garbage, trace, debug, info, warning, error, critical,
// quiet) mapped to spdlog's; nullopt for anything else.
std::optional<spdlog::level::level_enum> parse_log_level(const std::string& name);

// Sets the default logger: stderr, or `file` (appended) when it is not empty.
// Throws base::error naming the file when it cannot be opened.
void init_logging(const std::string& file, spdlog::level::level_enum level,
                  const std::string& name);

}  // namespace brine::base
