#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "modules/registry.h"

// Salt's data helpers that several modules share (salt.utils.data,
// salt.utils.dictupdate).
namespace brine::modules {

class arguments;

// Salt's traverse_dict_and_list: walks `key` split on `delimiter` through
// maps, list indexes and maps inside lists; null when the path is not there.
const nlohmann::json* traverse(const nlohmann::json& data, std::string_view key,
                               std::string_view delimiter = ":");

// Salt's dictupdate.update: maps merged recursively into `dest`, anything
// else replaced; with `merge_lists`, a list extends the list it lands on
// with the items that list lacks.
void dict_update(nlohmann::json& dest, const nlohmann::json& upd, bool merge_lists = false);

// Salt's grains.item and pillar.item: {key: the value at key in `data`, or
// default= ('' when not given)} for each positional key, walked with
// delimiter= (':').
nlohmann::json items_at(const nlohmann::json& data, const arguments& a);

// Salt's config.DEFAULTS (salt/modules/config.py): the last place
// config.get looks, and the base of its merge=.
const nlohmann::json& config_defaults();

// Python's fnmatch.fnmatchcase.
bool fnmatch(std::string_view pattern, std::string_view text);

// The minion context of a function that needs one, or a base::error saying
// that `fun` runs only on a minion.
minion_context& need_context(const call& c);

}  // namespace brine::modules
