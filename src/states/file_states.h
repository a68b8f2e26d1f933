#pragma once

// The file states other file states call, as Salt's file.recurse calls
// managed() and directory() for each path it manages.

#include <asio/awaitable.hpp>
#include <set>
#include <string>

#include "states/registry.h"

namespace brine::states {

// file.managed and file.directory (file_states.cc).
asio::awaitable<json> file_managed(state_call c);
asio::awaitable<json> file_directory(state_call c);

// file.cached (file_cache_states.cc), which archive.extracted caches its
// source with.
asio::awaitable<json> file_cached(state_call c);

// Salt's _gen_keep_files: the paths that clean must keep below `name` for
// the states `c` requires (`require: - file: X`), read from the run's
// chunks (__lowstate__): a required file.recurse's managed paths, all of
// another required directory state's tree, a required file itself.
asio::awaitable<std::set<std::string>> keep_from_requires(state_call c, std::string name);

// The paths file.recurse `c` manages (file_recurse_states.cc): its files
// and include_empty directories; none when its source is not a directory.
asio::awaitable<std::set<std::string>> recurse_keep(state_call c);

}  // namespace brine::states
