#pragma once

#include "modules/registry.h"

namespace brine::state {

// state.show_top, state.show_highstate, state.show_lowstate,
// state.show_sls, state.show_low_sls, state.sls_exists and slsutil.renderer:
// they compile on a worker thread of their own (never on the caller's
// I/O thread) and await the result. Registered by the minion and by
// brine call beside register_builtin_modules.
void register_state_module(modules::registry& reg);

}  // namespace brine::state
