// Salt's sysctl state: sysctl.present, through the sysctl module's execution
// functions (sysctl.show, sysctl.get, sysctl.persist).

#include <string>
#include <vector>

#include "base/error.h"
#include "states/python_text.h"
#include "states/registry.h"

namespace brine::states {
namespace sysctl_states {
namespace {

using plain_json = nlohmann::json;

// Whitespace runs as one space (Salt's re.sub(" +|\t+", " ", ...)).
std::string squeeze(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if ((ch == ' ' || ch == '\t') && !out.empty() && out.back() == ' ') continue;
    out += ch == '\t' ? ' ' : ch;
  }
  return out;
}

std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : s) {
    if (std::isspace(static_cast<unsigned char>(ch))) {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

asio::awaitable<json> present(state_call c) {
  const std::string name = c.name();
  json ret = result_first_ret(name);
  const json* v = c.arg("value");
  const std::string value = v == nullptr ? "" : py_text(*v);
  std::string config;
  if (const json* cfg = c.arg("config"); cfg != nullptr && !cfg->is_null()) {
    config = py_text(*cfg);
  } else {
    std::string fun = "sysctl.default_config";
    plain_json none = plain_json::array();
    json d = co_await c.run(std::move(fun), std::move(none));
    config = d.get<std::string>();
  }
  if (c.test) {
    std::string show = "sysctl.show";
    plain_json show_kwargs = {{"config_file", config}};
    plain_json none = plain_json::array();
    json configured = co_await c.run(std::move(show), std::move(none), std::move(show_kwargs));
    if (configured.is_null()) {
      ret["result"] = nullptr;
      ret["comment"] = "Sysctl option " + name + " might be changed, we failed to check config "
                       "file at " + config + ". The file is either unreadable, or missing.";
      co_return ret;
    }
    std::string get = "sysctl.get";
    plain_json get_args = plain_json::array({name});
    json running = co_await c.run(std::move(get), std::move(get_args));
    const std::string current = running.is_string() ? running.get<std::string>() : "";
    const bool in_config = configured.is_object() && configured.contains(name);
    if (!current.empty()) {
      if (in_config) {
        if (words(value) == words(current)) {
          ret["comment"] = "Sysctl value " + name + " = " + value + " is already set";
          co_return ret;
        }
      } else if (squeeze(current) != squeeze(value)) {
        ret["result"] = nullptr;
        ret["comment"] = "Sysctl option " + name + " set to be changed to " + value;
        co_return ret;
      } else {
        ret["result"] = nullptr;
        ret["comment"] = "Sysctl value is currently set on the running system but not in a "
                         "config file. Sysctl option " + name + " set to be changed to " + value +
                         " in config file.";
        co_return ret;
      }
    } else if (in_config) {
      ret["result"] = nullptr;
      ret["comment"] = "Sysctl value " + name + " is present in configuration file but is not "
                       "present in the running config. The value " + name +
                       " is set to be changed to " + value;
      co_return ret;
    }
    ret["result"] = nullptr;
    ret["comment"] = "Sysctl option " + name + " would be changed to " + value;
    co_return ret;
  }
  std::string update;
  try {
    std::string fun = "sysctl.persist";
    plain_json args = plain_json::array({name, value, config});
    json r = co_await c.run(std::move(fun), std::move(args));
    update = r.is_string() ? r.get<std::string>() : "";
  } catch (const base::error& e) {
    ret["result"] = false;
    ret["comment"] = "Failed to set " + name + " to " + value + ": " + e.what();
    co_return ret;
  }
  if (update == "Updated") {
    ret["changes"][name] = *v;
    ret["comment"] = "Updated sysctl value " + name + " = " + value;
  } else if (update == "Already set") {
    ret["comment"] = "Sysctl value " + name + " = " + value + " is already set";
  }
  co_return ret;
}

}  // namespace
}  // namespace sysctl_states

void register_sysctl_states(registry& reg) {
  using namespace sysctl_states;
  reg.add("sysctl.present", present, {"name", "value"},
          "sysctl.present name=KEY value=VALUE [config=FILE]: the kernel parameter has the value, "
          "now (sysctl -w) and at boot (the line 'KEY = VALUE' in config, by default "
          "/etc/sysctl.d/99-salt.conf where systemd runs, /etc/sysctl.conf elsewhere)");
}

}  // namespace brine::states
