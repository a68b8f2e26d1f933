#pragma once

#include <string>

#include "modules/context.h"
#include "modules/registry.h"
#include "render/value.h"
#include "state/highstate.h"

// The `salt` a template sees: execution functions callable as
// salt['mod.fun'](...), salt.mod.fun(...) and salt[name](**kwargs).
//
// Functions of the registry are asio awaitables; a template calls them
// synchronously, so each call runs to completion on a private io_context
// in the compiling thread (that thread must not be an I/O thread of the
// daemon). Salt's pure data functions (grains.get/filter_by, pillar.get,
// config.get/option/merge/dot_vals, defaults.*, slsutil.merge/update/...,
// cp.list_*, file.join, log.*) run natively on the template's own values instead: they keep
// key order and share objects as Python does (defaults.merge changes its
// first argument in place, pillar.get returns the pillar's own dict).
namespace brine::state {

// `ctx` may be null (functions that need a minion then fail saying so).
// The value refers to `c` and `reg`, which must outlive it.
render::value make_salt(compiler& c, const modules::registry& reg, modules::minion_context* ctx);

}  // namespace brine::state
