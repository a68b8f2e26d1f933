#pragma once

#include <nlohmann/json.hpp>

#include "pillar/pillar.h"
#include "target/target.h"

// Salt's ext_pillar interfaces (salt/pillar/*.py) that brine has, for the
// pillar compiler's options::ext_pillars: node data from outside the
// pillar_roots, merged into each minion's pillar. See README.md.
namespace brine::ext_pillar {

// What the interfaces read of the host (the master, or a masterless
// minion).
struct host {
  // The host's options under Salt's names (postgres.host, ...), as
  // config.option reads them.
  nlohmann::json opts = nlohmann::json::object();
  // The master's nodegroups, for file_tree's nodegroups/ directory.
  target::nodegroups groups;
};

using interfaces = std::map<std::string, pillar::options::ext_function, std::less<>>;

// cmd_json, cmd_yaml, file_tree, http_json, http_yaml and postgres.
interfaces builtin(const host& h);

// The single interfaces (tests, and builtin).
pillar::options::ext_function cmd_json();
pillar::options::ext_function cmd_yaml();
pillar::options::ext_function http_json();
pillar::options::ext_function http_yaml();
pillar::options::ext_function file_tree(target::nodegroups groups);
pillar::options::ext_function postgres(nlohmann::json opts);

}  // namespace brine::ext_pillar
