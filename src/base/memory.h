#pragma once

#include <cstddef>

namespace brine::base {

// What release_clean_file_pages() did.
struct released_pages {
  size_t mappings = 0;  // mappings dropped from
  size_t bytes = 0;     // resident bytes they held before
};

// Drops this process's page-table entries for clean, read-only file pages:
// the code and constants of the binary and its shared libraries, which
// start-up (OpenSSL's initialisation, configuration parsing) touched once
// and an idle daemon does not touch again. The pages stay in the page cache,
// shared with every other process that maps them; a later access maps them
// back with a minor fault. Writable mappings, and read-only ones holding any
// private (copied-on-write) page such as relocated data, are left alone, so
// no content is ever lost.
//
// Linux only (reads /proc/self/smaps); elsewhere, or if smaps cannot be
// read, it does nothing.
released_pages release_clean_file_pages();

}  // namespace brine::base
