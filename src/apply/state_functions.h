#pragma once

#include "modules/registry.h"
#include "states/registry.h"

namespace brine::apply {

// The execution functions that apply states, Salt's names and arguments:
// state.apply, state.highstate, state.sls, state.sls_id, state.single,
// state.low, state.test and state.running. Each compiles on the compile pool
// (src/state), then runs the chunks with the runner on the job's executor.
// `states` must outlive `reg`.
void register_state_functions(modules::registry& reg, const states::registry& states);

}  // namespace brine::apply
