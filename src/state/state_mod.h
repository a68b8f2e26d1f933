#pragma once

#include <asio/awaitable.hpp>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "modules/context.h"
#include "modules/registry.h"
#include "state/highstate.h"

namespace brine::state {

// Runs blocking `work` (a compile: files, templates) on the compile pool and
// resumes the caller on its own executor with the outcome.
asio::awaitable<modules::outcome> on_pool(std::function<modules::outcome()> work);

// The file_roots a compile reads: with a master (a remote file client),
// every saltenv the master serves, its files brought into the minion's cache
// now (what changed since the last run, many files per request); nullopt
// when masterless (the configured file_roots, read in place). Throws
// base::error when the master cannot be asked.
using roots_list = std::vector<std::pair<std::string, std::vector<std::string>>>;
asio::awaitable<std::optional<roots_list>> state_tree(modules::minion_context& ctx);

// The minion a compile is for: id, grains, pillar (in Salt's key order) and
// options of the context.
minion minion_of(modules::minion_context& ctx);

// state.show_top, state.show_highstate, state.show_lowstate,
// state.show_sls, state.show_low_sls, state.sls_exists and slsutil.renderer:
// they compile on a worker thread of their own (never on the caller's
// I/O thread) and await the result. Registered by the minion and by
// brine call beside register_builtin_modules.
void register_state_module(modules::registry& reg);

}  // namespace brine::state
