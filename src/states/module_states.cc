// Salt's module states: module.run, module.wait (alias module.watch) and
// their mod_watch, which call execution functions from a state. Salt 3006
// takes both of its syntaxes and tells them apart by the state's arguments
// (salt/states/module.py `run`): when every argument but name is a function
// name (it has a dot), the new syntax runs each function with its list of
// arguments; otherwise the legacy one runs the function `name` with the
// other arguments as its keywords (m_name, m_fun, m_names, m_state,
// m_saltenv for the parameters whose names the state itself uses).
//
// Salt matches legacy arguments to the function's Python signature and drops
// the rest; brine's functions have no such signature to read, so every
// argument is passed by name (args= as the positional list, kwargs= merged),
// and a function that does not take one says so.

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "modules/registry.h"
#include "states/file_util.h"
#include "states/python_text.h"
#include "states/registry.h"

namespace brine::states {
namespace module_states {
namespace {

using plain_json = nlohmann::json;

// Salt's _get_dict_result: False when any "result" is False or any
// "retcode" is not 0, at any depth of mappings.
bool dict_result(const json& node) {
  for (const auto& [k, v] : node.items()) {
    if ((k == "result" && v.is_boolean() && !v.get<bool>()) ||
        (k == "retcode" && !(v.is_number() && v.get<double>() == 0))) {
      return false;
    }
    if (v.is_object() && !dict_result(v)) return false;
  }
  return true;
}

// Salt's _get_result: a bool is the result, a mapping is searched.
bool get_result(const json& ret) {
  if (ret.is_boolean()) return ret.get<bool>();
  if (ret.is_object()) return dict_result(ret);
  return true;
}

// What a function call gave: its return, or the message it failed with
// (Salt's exception).
struct called {
  json ret;
  bool raised = false;
  std::string error;
};

asio::awaitable<called> call_function(state_call c, std::string fun, plain_json args,
                                      plain_json kwargs) {
  called out;
  if (c.functions == nullptr) throw base::error("module.run: no execution functions to call");
  modules::call call;
  call.fun = std::move(fun);
  call.args = std::move(args);
  call.kwargs = std::move(kwargs);
  call.jid = c.jid;
  call.timeout = c.timeout;
  call.context = c.context;
  modules::outcome o = co_await modules::execute(*c.functions, std::move(call));
  // A failed job whose return is "ERROR: ..." is a function that raised; a
  // failed job with a return of its own (cmd.run's output) returned it.
  if (!o.success && o.ret.is_string() && o.ret.get<std::string>().starts_with("ERROR: ")) {
    out.raised = true;
    out.error = o.ret.get<std::string>().substr(7);
    co_return out;
  }
  out.ret = o.ordered_ret ? *o.ordered_ret : json(o.ret);
  co_return out;
}

plain_json plain(const json& v) { return plain_json(v); }

// The new syntax: every argument with a dot is a function ("fun" or
// "fun:tag" to call one twice), its value the list of its arguments
// (mappings are keywords, the rest positional).
asio::awaitable<json> run_new(state_call c, json kwargs) {
  kwargs.erase("name");
  json ret = json::object();
  json names = json::array();
  for (const auto& [k, v] : kwargs.items()) names.push_back(k);
  ret["name"] = names;
  ret["changes"] = json::object();
  ret["comment"] = "";
  ret["result"] = nullptr;
  std::vector<std::string> functions;
  for (const auto& [k, v] : kwargs.items()) {
    if (k.find('.') != std::string::npos) functions.push_back(k);
  }
  std::vector<std::string> missing;
  std::vector<std::string> tests;
  for (const auto& f : functions) {
    std::string fun = f.substr(0, f.find(':'));
    if (c.functions == nullptr || c.functions->find(fun) == nullptr) {
      missing.push_back(fun);
    } else if (c.test) {
      tests.push_back(fun);
    }
  }
  if (functions.empty()) {
    ret["comment"] = "No function provided.";
    ret["result"] = false;
    co_return ret;
  }
  auto join = [](const std::vector<std::string>& v, const std::string& sep) {
    std::string out;
    for (std::size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
    return out;
  };
  if (!tests.empty() || !missing.empty()) {
    // Salt formats its plural flag `len(x) > 1 or ""`: "True" or nothing.
    std::string a = missing.empty() ? "" :
        "Unavailable function" + std::string(missing.size() > 1 ? "True" : "") + ": " +
        join(missing, ", ") + ".";
    std::string b = tests.empty() ? "" :
        "Function" + std::string(tests.size() > 1 ? "True" : "") + " " + join(tests, ", ") +
        " to be executed.";
    ret["comment"] = py_strip(a + " " + b);
    if (!missing.empty()) ret["result"] = false;
    co_return ret;
  }
  std::vector<std::string> failures;
  std::vector<std::string> success;
  for (const auto& f : functions) {
    std::string fun = f.substr(0, f.find(':'));
    plain_json args = plain_json::array();
    plain_json fkwargs = plain_json::object();
    const json& given = kwargs[f];
    if (!given.is_null()) {
      json items = given.is_array() ? given : json::array({given});
      for (const auto& item : items) {
        if (item.is_object()) {
          for (const auto& [k, v] : item.items()) fkwargs[k] = plain(v);
        } else {
          args.push_back(plain(item));
        }
      }
    }
    called got = co_await call_function(c, std::move(fun), std::move(args), std::move(fkwargs));
    if (got.raised) {
      failures.push_back("'" + f + "' failed: " + got.error);
      continue;
    }
    if (!get_result(got.ret)) {
      if (got.ret.is_object()) {
        const json* comment = got.ret.contains("comment") ? &got.ret["comment"] : nullptr;
        failures.push_back("'" + f + "' failed: " +
                           (comment ? py_text(*comment) : "(error message N/A)"));
      }
      if (got.ret.is_boolean()) failures.push_back("'" + f + "': False");
    } else {
      std::string what;
      if (got.ret.is_object()) {
        what = got.ret.contains("comment") ? py_text(got.ret["comment"]) : "Success";
      } else {
        what = py_text(got.ret);
      }
      success.push_back(f + ": " + what);
      ret["changes"][f] = got.ret;
    }
  }
  std::vector<std::string> all = failures;
  all.insert(all.end(), success.begin(), success.end());
  ret["comment"] = join(all, ", ");
  ret["result"] = failures.empty();
  co_return ret;
}

// The state's own names for the function's parameters of the same name.
std::string unprefixed(const std::string& key) {
  static const std::set<std::string> k_prefixed = {"m_name", "m_fun", "m_names", "m_state",
                                                   "m_saltenv"};
  return k_prefixed.contains(key) ? key.substr(2) : key;
}

std::string prefixed(const std::string& param) {
  static const std::set<std::string> k_params = {"name", "fun", "names", "state", "saltenv"};
  return k_params.contains(param) ? "m_" + param : param;
}

asio::awaitable<json> run_legacy(state_call c, json kwargs) {
  std::string name = kwargs.contains("name") ? py_text(kwargs["name"]) : "";
  json ret = json::object();
  ret["name"] = name;
  ret["changes"] = json::object();
  ret["comment"] = "";
  ret["result"] = nullptr;
  if (c.functions == nullptr || c.functions->find(name) == nullptr) {
    ret["comment"] = "Module function " + name + " is not available";
    ret["result"] = false;
    co_return ret;
  }
  if (c.test) {
    ret["comment"] = "Module function " + name + " is set to execute";
    co_return ret;
  }
  plain_json args = plain_json::array();
  plain_json fkwargs = plain_json::object();
  for (const auto& [k, v] : kwargs.items()) {
    if (k == "name" || k == "returner" || k == "sfun" || k == "__reqs__") continue;
    if (k == "args") {
      if (!v.is_array()) {
        ret["comment"] = "'args' must be a list.";
        ret["result"] = false;
        co_return ret;
      }
      for (const auto& a : v) args.push_back(plain(a));
    } else if (k == "kwargs") {
      if (!v.is_object()) {
        ret["comment"] = "'kwargs' must be a dict.";
        ret["result"] = false;
        co_return ret;
      }
      for (const auto& [kk, vv] : v.items()) fkwargs[kk] = plain(vv);
    } else {
      fkwargs[unprefixed(k)] = plain(v);
    }
  }
  std::string fun = name;
  called got = co_await call_function(c, std::move(fun), std::move(args), std::move(fkwargs));
  if (got.raised) {
    // brine's argument check names a missing parameter; Salt finds it from
    // the signature and names it as the state spells it.
    const std::string marker = ": missing argument '";
    if (auto at = got.error.find(marker); at != std::string::npos && got.error.starts_with(name)) {
      std::string param = got.error.substr(at + marker.size());
      param = param.substr(0, param.find('\''));
      ret["comment"] = "The following arguments are missing: " + prefixed(param);
    } else {
      ret["comment"] =
          "Module function " + name + " threw an exception. Exception: " + got.error;
    }
    ret["result"] = false;
    co_return ret;
  }
  ret["changes"]["ret"] = got.ret;
  ret["comment"] = "Module function " + name + " executed";
  ret["result"] = get_result(got.ret);
  co_return ret;
}

// Salt's run: legacy when any argument but name (and the watch bookkeeping)
// has no dot, or when there is no such argument at all.
asio::awaitable<json> run(state_call c) {
  json kwargs = extra_kwargs(c);
  bool legacy = false;
  bool any = false;
  for (const auto& [k, v] : kwargs.items()) {
    if (k == "name" || k == "__reqs__" || k == "sfun") continue;
    any = true;
    if (k.find('.') == std::string::npos) legacy = true;
  }
  if (!any && !kwargs.empty()) legacy = true;
  if (legacy) co_return co_await run_legacy(std::move(c), std::move(kwargs));
  co_return co_await run_new(std::move(c), std::move(kwargs));
}

asio::awaitable<json> wait(state_call c) { co_return make_ret(c.name(), true, ""); }

}  // namespace
}  // namespace module_states

void register_module_states(registry& reg) {
  using namespace module_states;
  reg.add("module.run", run, {},
          "module.run: calls execution functions. New syntax: each argument `fun: [ARGS]` "
          "(mappings are keywords, `fun:tag` calls one twice); legacy syntax: name=FUN and its "
          "arguments as keywords (m_name, m_fun, m_names, m_state, m_saltenv for those names, "
          "args=[...], kwargs={...})");
  reg.add("module.wait", wait, {"name"},
          "module.wait: module.run, only when a watch requisite fires");
  reg.add("module.watch", wait, {"name"}, "module.watch: module.wait's other name");
  reg.add("module.mod_watch", run, {},
          "module.mod_watch: what a watch requisite on module.run or module.wait runs");
}

}  // namespace brine::states
