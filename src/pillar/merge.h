#pragma once

#include <nlohmann/json.hpp>

#include "pillar/pillar.h"

namespace brine::pillar::detail {

// Salt's salt.utils.dictupdate.merge(dest, upd, strategy, "yaml", merge_lists)
// for two mappings, laying `upd` over `dest` in place:
// - smart (with the yaml renderer), recurse: mappings merged key by key,
//   recursively; anything else in `upd` replaces what `dest` holds, except
//   that with merge_lists a list laid over a list becomes `dest`'s list
//   followed by the items of `upd`'s list that `dest`'s list did not hold;
// - none: recurse, never merging lists;
// - overwrite, aggregate: each top-level key of `upd` replaces `dest`'s.
// As with Python's dicts, a key `dest` has keeps its place and a new key
// goes last: with nlohmann::ordered_json the result is in Salt's key order.
// Json: nlohmann::json or nlohmann::ordered_json.
template <class Json>
void merge(Json& dest, const Json& upd, strategy s, bool merge_lists);

}  // namespace brine::pillar::detail
