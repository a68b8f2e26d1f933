#include "tops/tops.h"

#include <spdlog/spdlog.h>

#include "base/error.h"
#include "base/run_here.h"
#include "modules/arguments.h"
#include "modules/data.h"
#include "modules/process.h"
#include "render/yaml.h"

namespace brine::tops {

using nlohmann::json;

namespace {

// Python's shlex.quote: safe words as they are, others in single quotes.
std::string shlex_quote(const std::string& s) {
  if (s.empty()) return "''";
  bool safe = true;
  for (unsigned char c : s) {
    if (!(std::isalnum(c) != 0 || std::string_view("@%+=:,./-_").find(static_cast<char>(c)) !=
                                      std::string_view::npos)) {
      safe = false;
    }
  }
  if (safe) return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\"'\"'") : std::string(1, c);
  return out + "'";
}

}  // namespace

json ext_nodes(const std::string& command, std::string_view id) {
  modules::process_options o;
  for (const auto& word : modules::shlex_split("master_tops ext_nodes", command)) {
    o.argv.push_back(shlex_quote(word));
  }
  o.argv.push_back(shlex_quote(std::string(id)));
  o.timeout = std::chrono::minutes(5);
  auto r = base::run_here<modules::process_result>(
      [&o] { return modules::run_process(std::move(o)); });
  if (r.retcode != 0) {
    // Salt's subprocess.run(check=True) raises CalledProcessError.
    throw base::error("Command '" + command + " " + std::string(id) +
                      "' returned non-zero exit status " + std::to_string(r.retcode) + ".");
  }
  json data = render::load_yaml<json>(r.stdout_text, "master_tops ext_nodes");
  json ret = json::object();
  if (!data.is_object()) {
    spdlog::info("master_tops ext_nodes call did not return any data");
    if (data.is_null()) throw base::error("argument of type 'NoneType' is not iterable");
    return ret;
  }
  std::string env = "base";
  if (auto e = data.find("environment"); e != data.end()) {
    env = e->is_string() ? e->get<std::string>() : e->dump();
  }
  auto classes = data.find("classes");
  if (classes == data.end()) {
    spdlog::info("master_tops ext_nodes call did not have a dictionary with a \"classes\" key.");
    return ret;
  }
  json names = json::array();
  if (classes->is_object()) {
    for (const auto& [k, v] : classes->items()) names.push_back(k);
  } else if (classes->is_array()) {
    for (const auto& n : *classes) names.push_back(n.is_string() ? n : json(n.dump()));
  } else {
    return ret;
  }
  ret[env] = std::move(names);
  return ret;
}

function from_option(const json& master_tops) {
  if (master_tops.is_null() || (master_tops.is_object() && master_tops.empty())) return {};
  if (!master_tops.is_object()) {
    throw base::error("master_tops must be a mapping of a tops module to its configuration, "
                      "e.g. {ext_nodes: /usr/local/bin/classifier}");
  }
  std::string command;
  for (const auto& [name, config] : master_tops.items()) {
    if (name != "ext_nodes") {
      throw base::error("master_tops: module '" + name +
                        "' is unavailable in brine; use ext_nodes");
    }
    if (!config.is_string() || config.get<std::string>().empty()) {
      throw base::error("master_tops: ext_nodes must be a command (the minion id is added)");
    }
    command = config.get<std::string>();
  }
  return [command](std::string_view id, const json&) -> json {
    json ret = json::object();
    try {
      // Salt: dictupdate.merge(ret, top, merge_lists=True).
      modules::dict_update(ret, ext_nodes(command, id), true);
    } catch (const std::exception& e) {
      spdlog::error("Top function ext_nodes.top failed with error {} for minion {}", e.what(), id);
    }
    return ret;
  };
}

}  // namespace brine::tops
