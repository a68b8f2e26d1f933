// Salt's alternatives states (salt/states/alternatives.py): install, remove,
// auto and set, through the alternatives execution functions, with Salt's
// returns, comments and key order branch by branch.

#include <sstream>
#include <string>

#include "base/error.h"
#include "base/python_truth.h"
#include "states/python_text.h"
#include "states/registry.h"

namespace brine::states {
namespace alternatives_states {
namespace {

using plain_json = nlohmann::json;

std::string text_arg(const state_call& c, const char* key) {
  const json* v = c.arg(key);
  return v == nullptr || v->is_null() ? "" : py_text(*v);
}

json arg_or_none(const state_call& c, const char* key) {
  const json* v = c.arg(key);
  return v == nullptr ? json() : *v;
}

// An execution function's answer as the state reads it; a failing tool's
// words (Salt's functions return stderr rather than raise).
asio::awaitable<json> answer(const state_call& c, std::string fun, plain_json args) {
  try {
    co_return co_await c.run(std::move(fun), std::move(args));
  } catch (const base::error& e) {
    co_return json(e.what());
  }
}

// The positional arguments of a call, built outside the co_await
// expression (GCC 12 cannot keep a braced list alive across one).
plain_json list_of(const std::string& a) { return plain_json::array({a}); }
plain_json list_of(const std::string& a, const std::string& b) { return plain_json::array({a, b}); }

// The return of remove and set: {name, path, result, changes, comment}.
json path_ret(const state_call& c) {
  json ret = json::object();
  ret["name"] = c.name();
  ret["path"] = arg_or_none(c, "path");
  ret["result"] = true;
  ret["changes"] = json::object();
  ret["comment"] = "";
  return ret;
}

std::string first_line(const json& display) {
  std::string text = display.is_string() ? display.get<std::string>() : py_text(display);
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return line;
}

asio::awaitable<json> install(state_call c) {
  const std::string name = c.name();
  const std::string path = text_arg(c, "path");
  json ret = json::object();
  ret["name"] = name;
  ret["link"] = arg_or_none(c, "link");
  ret["path"] = arg_or_none(c, "path");
  ret["priority"] = arg_or_none(c, "priority");
  ret["result"] = true;
  ret["changes"] = json::object();
  ret["comment"] = "";
  const std::string priority = text_arg(c, "priority");
  if (base::python_truth(co_await answer(c, "alternatives.check_exists", list_of(name, path)))) {
    ret["comment"] = "Alternative " + path + " for " + name + " is already registered";
    co_return ret;
  }
  if (c.test) {
    ret["comment"] =
        "Alternative will be set for " + name + " to " + path + " with priority " + priority;
    ret["result"] = nullptr;
    co_return ret;
  }
  plain_json install_args = plain_json::array();
  install_args.push_back(name);
  install_args.push_back(text_arg(c, "link"));
  install_args.push_back(path);
  install_args.push_back(plain_json(ret["priority"]));
  json out = co_await answer(c, "alternatives.install", std::move(install_args));
  if (base::python_truth(co_await answer(c, "alternatives.check_exists", list_of(name, path)))) {
    if (base::python_truth(co_await answer(c, "alternatives.check_installed", list_of(name, path)))) {
      ret["comment"] =
          "Alternative for " + name + " set to path " + path + " with priority " + priority;
    } else {
      ret["comment"] = "Alternative " + path + " for " + name + " registered with priority " +
                       priority + " and not set to default";
    }
    json changes = json::object();
    changes["name"] = name;
    changes["link"] = ret["link"];
    changes["path"] = ret["path"];
    changes["priority"] = ret["priority"];
    ret["changes"] = std::move(changes);
  } else {
    ret["result"] = false;
    ret["comment"] = "Alternative for " + name + " not installed: " + py_text(out);
  }
  co_return ret;
}

asio::awaitable<json> remove(state_call c) {
  const std::string name = c.name();
  const std::string path = text_arg(c, "path");
  json ret = path_ret(c);
  if (base::python_truth(co_await answer(c, "alternatives.check_exists", list_of(name, path)))) {
    if (c.test) {
      ret["comment"] = "Alternative for " + name + " will be removed";
      ret["result"] = nullptr;
      co_return ret;
    }
    co_await answer(c, "alternatives.remove", list_of(name, path));
    json current = co_await answer(c, "alternatives.show_current", list_of(name));
    if (base::python_truth(current)) {
      ret["comment"] = "Alternative for " + name + " removed. Falling back to path " + py_text(current);
      ret["changes"] = json{{"path", current}};
      co_return ret;
    }
    ret["comment"] = "Alternative for " + name + " removed";
    co_return ret;
  }
  json current = co_await answer(c, "alternatives.show_current", list_of(name));
  if (base::python_truth(current)) {
    ret["comment"] = "Alternative for " + name + " is set to it's default path " + py_text(current);
    co_return ret;
  }
  ret["result"] = false;
  ret["comment"] = "Alternative for " + name + " doesn't exist";
  co_return ret;
}

asio::awaitable<json> auto_(state_call c) {
  const std::string name = c.name();
  json ret = json::object();
  ret["name"] = name;
  ret["result"] = true;
  ret["comment"] = "";
  ret["changes"] = json::object();
  std::string line = first_line(co_await answer(c, "alternatives.display", list_of(name)));
  if (line.ends_with(" auto mode")) {
    ret["comment"] = name + " already in auto mode";
    co_return ret;
  }
  if (c.test) {
    ret["comment"] = name + " will be put in auto mode";
    ret["result"] = nullptr;
    co_return ret;
  }
  ret["changes"]["result"] = co_await answer(c, "alternatives.auto", list_of(name));
  co_return ret;
}

asio::awaitable<json> set_(state_call c) {
  const std::string name = c.name();
  const std::string path = text_arg(c, "path");
  json ret = path_ret(c);
  json current = co_await answer(c, "alternatives.show_current", list_of(name));
  if (current.is_string() && current.get<std::string>() == path) {
    ret["comment"] = "Alternative for " + name + " already set to " + path;
    co_return ret;
  }
  json display = co_await answer(c, "alternatives.display", list_of(name));
  bool registered = false;
  std::istringstream in(display.is_string() ? display.get<std::string>() : "");
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with(path)) {
      registered = true;
      break;
    }
  }
  if (!registered) {
    ret["result"] = false;
    ret["comment"] = "Alternative " + path + " for " + name + " doesn't exist";
    co_return ret;
  }
  if (c.test) {
    ret["comment"] = "Alternative for " + name + " will be set to path " + path;
    ret["result"] = nullptr;
    co_return ret;
  }
  co_await answer(c, "alternatives.set", list_of(name, path));
  current = co_await answer(c, "alternatives.show_current", list_of(name));
  if (current.is_string() && current.get<std::string>() == path) {
    ret["comment"] = "Alternative for " + name + " set to path " + path;
    ret["changes"] = json{{"path", current}};
  } else {
    ret["comment"] = "Alternative for " + name + " not updated";
  }
  co_return ret;
}

}  // namespace
}  // namespace alternatives_states

void register_alternatives_states(registry& reg) {
  using namespace alternatives_states;
  reg.add("alternatives.install", install, {"name", "link", "path", "priority"},
          "alternatives.install name=NAME link=LINK path=PATH priority=N: PATH is registered as "
          "an alternative of NAME (update-alternatives --install)");
  reg.add("alternatives.remove", remove, {"name", "path"},
          "alternatives.remove name=NAME path=PATH: PATH is not an alternative of NAME");
  reg.add("alternatives.auto", auto_, {"name"},
          "alternatives.auto name=NAME: NAME is in auto mode (the highest priority wins)");
  reg.add("alternatives.set", set_, {"name", "path"},
          "alternatives.set name=NAME path=PATH: NAME points at PATH, one of its alternatives");
}

}  // namespace brine::states
