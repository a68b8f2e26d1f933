#pragma once

#include <asio/awaitable.hpp>
#include <functional>

#include "modules/context.h"
#include "modules/registry.h"
#include "state/highstate.h"

namespace brine::state {

// Runs blocking `work` (a compile: files, templates) on the compile pool and
// resumes the caller on its own executor with the outcome.
asio::awaitable<modules::outcome> on_pool(std::function<modules::outcome()> work);

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
