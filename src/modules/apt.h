#pragma once

#include <asio/awaitable.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "modules/process.h"

// What the pkg module's two files (pkg_mod.cc: packages; pkg_repo_mod.cc:
// apt sources) share: apt's tools run as Salt's aptpkg runs them, and
// apt-get update. Definitions in pkg_mod.cc.
namespace brine::modules::apt {

// Runs an apt or dpkg tool non-interactively in the C locale, bounded by
// the job's limit; `stdin_text` is written to its standard input.
asio::awaitable<process_result> run_tool(std::chrono::seconds limit,
                                         std::vector<std::string> argv,
                                         std::string stdin_text = "");

// Salt's refresh_db: apt-get update, answering {source: True (fetched) |
// None (unchanged) | False (ignored or failed)}; throws tool_failure when
// apt-get fails (or, with failhard, when a source failed).
asio::awaitable<nlohmann::json> refresh(std::chrono::seconds limit, double cache_valid_time,
                                        bool failhard);

// -1, 0 or 1, as `dpkg --compare-versions`.
int compare_versions(std::string_view a, std::string_view b);

// Salt's salt.utils.pkg.split_comparison: "(<=>|!=|>=|<=|>>|<<|<>|>|<|=)? ?V"
// with V free of '<', '>' and '=' as {operator, V}; anything else is a bare
// version, {"", spec}.
std::pair<std::string, std::string> split_comparison(const std::string& spec);

}  // namespace brine::modules::apt
