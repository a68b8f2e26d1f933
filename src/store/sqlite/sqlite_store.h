#pragma once

#include <cstdint>

// The SQLite backend is reached through store::open_sqlite(); this header only
// exposes the facts about its file format that tests and tools need to check.
namespace brine::store {

// PRAGMA user_version of a file created by this build. A file with a lower
// version is migrated on open; a higher one is refused (written by a newer brine).
inline constexpr int k_sqlite_schema_version = 6;

// PRAGMA application_id of a brine database ("brin"), so that pointing the
// store at another program's SQLite file is refused instead of adding tables to it.
inline constexpr int32_t k_sqlite_application_id = 0x6272696e;

}  // namespace brine::store
