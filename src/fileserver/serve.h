#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "fileserver/backend.h"

namespace brine::fileserver {

// The server's answer to one file_request body (op envs, list or get), as a
// file_reply body (docs/protocol.md); `max_reply_bytes` bounds the file data
// of one reply. Anything malformed gets {"error": why}; a path that could
// leave the roots is answered with an error for that path alone. Blocking
// (walks, hashes, reads): call it off I/O threads.
nlohmann::json serve(backend& r, const nlohmann::json& request, uint64_t max_reply_bytes);

// A non-negative integer (MessagePack sends them unsigned; JSON built in
// C++ may hold them signed).
bool is_count(const nlohmann::json& v);

}  // namespace brine::fileserver
