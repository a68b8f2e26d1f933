// Salt's ini states (salt/states/ini_manage.py, 3006.10 and later):
// ini.options_present, through the ini execution functions, with Salt's
// comments, changes and test plan branch by branch.

#include <set>
#include <string>

#include "base/error.h"
#include "base/python_truth.h"
#include "states/python_text.h"
#include "states/registry.h"

namespace brine::states {
namespace ini_states {
namespace {

using plain_json = nlohmann::json;

// The keyword arguments every call to the ini module takes.
plain_json ini_kwargs(const state_call& c, const std::string& name) {
  plain_json kw = plain_json::object();
  kw["file_name"] = name;
  const json* sep = c.arg("separator");
  kw["separator"] = sep == nullptr || sep->is_null() ? std::string("=") : py_text(*sep);
  if (const json* e = c.arg("encoding"); e != nullptr && !e->is_null()) kw["encoding"] = py_text(*e);
  return kw;
}

// An execution function's answer in its own key order.
asio::awaitable<json> call_ini(const state_call& c, std::string fun, plain_json kwargs) {
  json out = co_await c.run(std::move(fun), plain_json::array(), std::move(kwargs));
  co_return out;
}

// ini.set_option of `sections` (None: Salt's sections=None) in the file.
asio::awaitable<json> set_option(const state_call& c, const std::string& name,
                                 plain_json sections, bool no_spaces) {
  plain_json kw = ini_kwargs(c, name);
  kw["sections"] = std::move(sections);
  kw["no_spaces"] = no_spaces;
  json out = co_await call_ini(c, "ini.set_option", std::move(kw));
  co_return out;
}

// ini.remove_option of `option` in `section` (None: above every section).
asio::awaitable<void> remove_option(const state_call& c, const std::string& name,
                                    plain_json section, const std::string& option) {
  plain_json kw = ini_kwargs(c, name);
  kw["section"] = std::move(section);
  kw["option"] = option;
  co_await call_ini(c, "ini.remove_option", std::move(kw));
}

asio::awaitable<json> options_present(state_call c) {
  const std::string name = c.name();
  json ret = json::object();
  ret["name"] = name;
  ret["changes"] = json::object();
  ret["result"] = true;
  ret["comment"] = "No anomaly detected";
  if (c.test) ret["comment"] = "";
  const bool strict = c.flag("strict");
  const bool no_spaces = c.flag("no_spaces");
  const json* given = c.arg("sections");
  json sections = given != nullptr && given->is_object() ? *given : json::object();
  std::string comment = ret["comment"];
  json changes = json::object();
  if (base::python_truth(given)) {
    json options = json::object();
    for (const auto& [sname, sbody] : sections.items()) {
      if (!sbody.is_object()) options[sname] = sbody;
    }
    json cur_ini = co_await call_ini(c, "ini.get_ini", ini_kwargs(c, name));
    json top_level = json::object();
    json original_sections = json::object();
    for (const auto& [key, val] : cur_ini.items()) {
      (val.is_object() ? original_sections : top_level)[key] = val;
    }
    if (c.test) {
      for (const auto& [option, value] : options.items()) {
        if (top_level.contains(option) && py_text(top_level[option]) == py_text(value)) {
          comment += "Unchanged key " + option + ".\n";
        } else {
          comment += "Changed key " + option + ".\n";
          ret["result"] = nullptr;
        }
      }
    } else {
      json updated = co_await set_option(c, name, plain_json(options), no_spaces);
      for (const auto& [k, v] : updated.items()) changes[k] = v;
    }
    if (strict) {
      for (const auto& [opt, value] : top_level.items()) {
        if (options.contains(opt)) continue;
        if (c.test) {
          comment += "Removed key " + opt + ".\n";
          ret["result"] = nullptr;
        } else {
          co_await remove_option(c, name, nullptr, opt);
          changes[opt] = json{{"before", value}, {"after", nullptr}};
        }
      }
    }
    for (const auto& [section_name, section_body] : sections.items()) {
      if (!section_body.is_object()) continue;
      const std::string descr = section_name.empty() ? "" : " in section " + section_name;
      changes[section_name] = json::object();
      const json original = original_sections.contains(section_name)
                                ? original_sections[section_name]
                                : json::object();
      if (strict) {
        for (const auto& [key, value] : original.items()) {
          if (section_body.contains(key)) continue;
          if (c.test) {
            comment += "Deleted key " + key + descr + ".\n";
            ret["result"] = nullptr;
          } else {
            co_await remove_option(c, name, section_name, key);
            changes[section_name][key] = json{{"before", value}, {"after", nullptr}};
          }
        }
      }
      if (c.test) {
        for (const auto& [option, value] : section_body.items()) {
          std::string have = original.contains(option) ? py_text(original[option]) : "#-#-";
          if (py_text(value) == have) {
            comment += "Unchanged key " + option + descr + ".\n";
          } else {
            comment += "Changed key " + option + descr + ".\n";
            ret["result"] = nullptr;
          }
        }
      } else {
        plain_json one = plain_json::object();
        one[section_name] = plain_json(section_body);
        json updated = co_await set_option(c, name, std::move(one), no_spaces);
        if (base::python_truth(updated) && updated.contains(section_name)) {
          for (const auto& [k, v] : updated[section_name].items()) changes[section_name][k] = v;
        }
        if (changes[section_name].empty()) changes.erase(section_name);
      }
    }
  } else if (!c.test) {
    changes = co_await set_option(c, name, given == nullptr ? plain_json() : plain_json(*given),
                                  no_spaces);
  }
  ret["comment"] = comment;
  if (changes.contains("error")) {
    ret["result"] = false;
    ret["comment"] = "Errors encountered. " + py_text(changes["error"]);
    ret["changes"] = json::object();
    co_return ret;
  }
  for (const auto& [ciname, body] : changes.items()) {
    if (base::python_truth(body)) {
      ret["comment"] = "Changes take effect";
      ret["changes"][ciname] = body;
    }
  }
  co_return ret;
}

}  // namespace
}  // namespace ini_states

void register_ini_states(registry& reg) {
  using namespace ini_states;
  reg.add("ini.options_present", options_present, {"name"},
          "ini.options_present name=FILE sections={section: {key: value}} [separator='='] "
          "[strict=False] [no_spaces=False]: the ini file holds these options (strict: only "
          "these)");
}

}  // namespace brine::states
