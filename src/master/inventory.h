#pragma once

#include <nlohmann/json.hpp>

#include "master/minion_cache.h"
#include "pki/key_registry.h"
#include "target/target.h"

namespace brine::master {

// `brine inventory` answered from what the master holds in memory: the
// accepted keys and the minion data cache (grains, pillar, the master each
// minion is connected to, when it was last seen, its last state run),
// matched as targeting matches, without a read of the store. The local
// API's `inventory` operation; see docs/protocol.md.
//
// `request`: {"target", "tgt_type", "delimiter", "fields": [{"from":
// "builtin"|"grain"|"pillar", "path": [KEY, ...]}, ...]}; the CLI has
// parsed the fields and checked pillar keys against
// inventory_pillar_keys. Answers {"ok": true, "count": N, "rows_msgpack":
// binary}: the MessagePack of [[ID, VALUE per field],
// ...] (written value by value, no tree per value) for the accepted minions
// the target matches (a minion whose grains, or pillar, are not cached
// does not match a grain, or pillar, term), in id order; last_run.* are
// null for a minion with no run known (the reports this master makes,
// and with a shared store those its peers make, heard by the change feed).
// A bad target or field: {"ok": false, "error", "bad_target": true}.
nlohmann::json answer_inventory(const nlohmann::json& request, const pki::key_registry& keys,
                                const minion_cache& cache, const target::nodegroups& groups);

}  // namespace brine::master
