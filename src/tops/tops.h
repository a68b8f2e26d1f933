#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string_view>

// Salt's master_tops: the master tells a minion which sls files of which
// saltenv its highstate applies, besides its top files, from an outside
// classifier (salt/tops/*.py; Puppet's external node classifier is the
// model). The master computes them with the minion's pillar and sends both;
// the state compiler merges them into the top file's matches
// (state::options::master_tops_first decides which come first).
namespace brine::tops {

// {saltenv: [sls, ...]} for minion `id` with its grains ({} when none are
// cached). Never throws: a failing module is logged, as Salt logs it, and
// gives nothing.
using function = std::function<nlohmann::json(std::string_view id, const nlohmann::json& grains)>;

// The master's master_tops option (a mapping of module to configuration).
// Modules: ext_nodes (a command run with the minion id; its YAML `classes`
// and `environment`). An empty function when none is configured; throws
// base::error naming a module brine lacks, and the one it has.
function from_option(const nlohmann::json& master_tops);

// Salt's ext_nodes top for one minion: runs `command ID` without a shell
// (its words as shlex splits them, each quoted as shlex.quote quotes it,
// Salt's quirk) and reads the YAML it prints. Throws base::error when the
// command fails or its output is not such a document.
nlohmann::json ext_nodes(const std::string& command, std::string_view id);

}  // namespace brine::tops
