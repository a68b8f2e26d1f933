#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "modules/context.h"
#include "modules/registry.h"
#include "pillar/pillar.h"

namespace brine::state {

// pillar::options::salt for pillar templates, as Salt's Pillar gives them
// `__salt__`: the execution functions of `reg`, with a file client over
// pillar_roots (Salt's Pillar serves pillar_roots as its file_roots), the
// minion's grains and `opts` (its id set). On a master, `ctx` is null: the
// functions run there, and those that need a minion fail saying so. Each
// minion's `salt` owns its compiler; `reg` and `ctx` must outlive the
// function.
std::function<pillar::options::minion_salt(std::string_view id, const nlohmann::json& grains)>
pillar_salt(std::map<std::string, std::vector<std::string>> pillar_roots,
            const modules::registry& reg, modules::minion_context* ctx, nlohmann::json opts);

}  // namespace brine::state
