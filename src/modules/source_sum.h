#pragma once

#include <asio/awaitable.hpp>
#include <optional>
#include <string>

// The hash a state declares for its source (Salt's source_sum): what
// file.get_source_sum makes of source_hash, a hash expression or a file of
// hashes, and file.extract_hash's search of such a file.
namespace brine::modules {

class minion_context;

struct source_sum {
  std::string hash_type;  // md5, sha1, sha224, sha256, sha384, sha512
  std::string hsum;       // lower-case hex
};

// Salt's hash type of a hex digest this long ("" for none).
std::string hash_type_of_length(std::size_t length);

// Throws Salt's "Source hash X format is invalid. ..." error.
[[noreturn]] void invalid_source_hash(const std::string& source_hash);

// A hash expression: "TYPE=HEX" or a bare digest (its type by length).
// Throws base::error with Salt's message for anything else.
source_sum parse_hash_expression(const std::string& source_hash);

// file.extract_hash over the text of a hash file: the hash on the line that
// names `source_hash_name`, else `file_name` (or its basename), else the
// source's basename, else the first hash of the file; nullopt when it holds
// none. `hash_type` "" takes any supported type.
std::optional<source_sum> extract_hash(const std::string& text, const std::string& hash_type,
                                       const std::string& file_name, const std::string& source,
                                       const std::string& source_hash_name);

// file.get_source_sum (get_source_sum.cc): source_hash as a hash expression, or a path, salt://,
// file://, http(s):// or ftp:// URL of a hash file searched by
// extract_hash. Throws base::error with Salt's message.
asio::awaitable<source_sum> get_source_sum(minion_context& ctx, std::string file_name,
                                           std::string source, std::string source_hash,
                                           std::string source_hash_name, std::string saltenv);

}  // namespace brine::modules
