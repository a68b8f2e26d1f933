#pragma once

#include <string>
#include <sys/types.h>

namespace brine::base {

// Creates `path` (not its parents) with `mode` if it does not exist. `option`
// names the config option for the error message. Throws base::error.
void ensure_dir(const std::string& path, mode_t mode, const std::string& option);

// Writes through a temporary file and rename(2), so readers never see half a file.
void write_file_atomic(const std::string& path, const std::string& data, mode_t mode);

// Reads a whole file; throws base::error naming the path.
std::string read_file(const std::string& path);

bool file_exists(const std::string& path);

// Throws base::error if `path` is readable or writable by group or others.
void require_private(const std::string& path);

std::string host_name();

}  // namespace brine::base
