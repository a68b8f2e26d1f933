#pragma once

#include <string>

#include "modules/registry.h"

namespace brine::modules {

// Where the alternatives module reads and what it runs: Salt's fixed paths
// by default; tests point them at a temp directory.
struct alternatives_paths {
  std::string links = "/etc/alternatives";
  std::string redhat_admin = "/var/lib/alternatives";     // show_link on RedHat
  std::string suse_admin = "/var/lib/rpm/alternatives";  // show_link on Suse
  // Where update-alternatives / alternatives are; empty: looked up in PATH.
  std::string tool_dir;
};

void register_alternatives_module(registry& reg, const alternatives_paths& paths);

}  // namespace brine::modules
