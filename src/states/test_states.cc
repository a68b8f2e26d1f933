// Salt's test states: answers with and without changes, failures, and a
// configurable state, none of which touch the machine. Salt's
// salt/states/test.py, its comments and changes as Salt words them.

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "states/registry.h"

namespace brine::states {
namespace test_states {
namespace {

json pretend_change() {
  json change = json::object();
  change["old"] = "Unchanged";
  change["new"] = "Something pretended to change";
  json changes = json::object();
  changes["testing"] = std::move(change);
  return changes;
}

// The comment= a test state is given, else its own.
std::string comment_or(const state_call& c, const std::string& fallback) {
  const json* v = c.arg("comment");
  if (v == nullptr || v->is_null()) return fallback;
  return v->is_string() ? v->get<std::string>() : v->dump();
}

asio::awaitable<json> succeed_without_changes(state_call c) {
  co_return make_ret(c.name(), true, comment_or(c, "Success!"));
}

asio::awaitable<json> fail_without_changes(state_call c) {
  json ret = make_ret(c.name(), false, comment_or(c, "Failure!"));
  if (c.test) ret["comment"] = "If we weren't testing, this would be a failure!";
  co_return ret;
}

asio::awaitable<json> succeed_with_changes(state_call c) {
  json ret = make_ret(c.name(), true, comment_or(c, "Success!"));
  ret["changes"] = pretend_change();
  if (c.test) {
    ret["result"] = nullptr;
    ret["comment"] = "If we weren't testing, this would be successful with changes";
  }
  co_return ret;
}

asio::awaitable<json> fail_with_changes(state_call c) {
  json ret = make_ret(c.name(), false, comment_or(c, "Failure!"));
  ret["changes"] = pretend_change();
  if (c.test) {
    ret["result"] = nullptr;
    ret["comment"] = "If we weren't testing, this would be failed with changes";
  }
  co_return ret;
}

// True, False or "Random" (Salt's spelling); anything else is Salt's error.
enum class tri { yes, no, random };
tri tri_arg(const state_call& c, const std::string& key, const std::string& label) {
  const json* v = c.arg(key);
  if (v == nullptr) return tri::yes;
  if (v->is_boolean()) return v->get<bool>() ? tri::yes : tri::no;
  if (v->is_string() && v->get<std::string>() == "Random") return tri::random;
  throw base::error("You have specified the state option '" + label +
                    "' with invalid arguments. It must be either 'True', 'False', or 'Random'");
}

bool coin() {
  static thread_local std::mt19937 gen{std::random_device{}()};
  return std::bernoulli_distribution(0.5)(gen);
}

asio::awaitable<json> configurable_test_state(state_call c) {
  const json* comment = c.arg("comment");
  std::string text = comment != nullptr && comment->is_string() ? comment->get<std::string>() : "";
  json ret = make_ret(c.name(), false, text);
  tri changes = tri_arg(c, "changes", "Changes");
  if (changes == tri::yes || (changes == tri::random && coin())) ret["changes"] = pretend_change();
  tri result = tri_arg(c, "result", "Result");
  ret["result"] = result == tri::random ? coin() : result == tri::yes;
  if (const json* w = c.arg("warnings"); w != nullptr && !w->is_null()) {
    if (w->is_string()) {
      ret["warnings"] = json::array({*w});
    } else if (w->is_array()) {
      ret["warnings"] = *w;
    } else {
      throw base::error(
          "You have specified the state option 'Warnings' with invalid arguments. It must be a "
          "string or a list of strings");
    }
  }
  if (c.test) {
    ret["result"] = changes == tri::no ? json(true) : json(nullptr);
    ret["comment"] = text.empty() ? "This is a test" : text;
    if (c.flag("allow_test_mode_failure") && result == tri::no) ret["result"] = false;
  }
  co_return ret;
}

asio::awaitable<json> show_notification(state_call c) {
  const json* text = c.arg("text");
  if (text == nullptr || text->is_null() || (text->is_string() && text->empty())) {
    throw base::error("Missing required argument text.");
  }
  co_return make_ret(c.name(), true, text->is_string() ? text->get<std::string>() : text->dump());
}

// Salt's test.mod_watch: which watched states changed ("state: id").
asio::awaitable<json> mod_watch(state_call c) {
  json changed = json::array();
  if (const json* reqs = c.arg("__reqs__"); reqs != nullptr && reqs->contains("watch")) {
    for (const auto& r : (*reqs)["watch"]) {
      if (r.value("__changed__", false)) {
        changed.push_back(r.value("state", "") + ": " + r.value("__id__", ""));
      }
    }
  }
  // result=, comment= and changes= given to the state override Salt's own.
  json ret = json::object();
  ret["name"] = c.name();
  const json* result = c.arg("result");
  ret["result"] = result != nullptr ? *result : json(true);
  const json* comment = c.arg("comment");
  ret["comment"] = comment != nullptr ? *comment : json("Watch statement fired.");
  if (const json* changes = c.arg("changes"); changes != nullptr) {
    ret["changes"] = *changes;
  } else {
    ret["changes"] = json::object();
    ret["changes"]["Requisites with changes"] = std::move(changed);
  }
  co_return ret;
}

// Salt's _if_str_then_list: one key, or a list of keys; anything else is
// Python's bare TypeError.
std::vector<std::string> key_list(const state_call& c, const char* arg) {
  std::vector<std::string> out;
  const json* v = c.arg(arg);
  if (v == nullptr || v->is_null() || (v->is_boolean() && !v->get<bool>()) ||
      ((v->is_array() || v->is_string() || v->is_object()) && v->empty())) {
    return out;
  }
  if (v->is_string()) {
    out.push_back(v->get<std::string>());
    return out;
  }
  if (!v->is_array()) {
    throw base::error(std::string("test.check_pillar: ") + arg +
                      " must be a key or a list of keys, got " + v->dump());
  }
  for (const auto& k : *v) out.push_back(k.is_string() ? k.get<std::string>() : k.dump());
  return out;
}

// What the value is, against Python's isinstance(value, T) for the types
// check_pillar knows (a bool is an int, as in Python).
bool is_type(const json& v, const std::string& type) {
  if (type == "None") return true;
  if (type == "<class 'bool'>") return v.is_boolean();
  if (type == "<class 'int'>") return v.is_boolean() || v.is_number_integer();
  if (type == "(<class 'str'>,)") return v.is_string();
  if (type == "<class 'list'>") return v.is_array();
  if (type == "<class 'dict'>") return v.is_object();
  return false;
}

// Salt's test.check_pillar: the keys are in the pillar (pillar.get, so
// "a:b" looks into nested mappings), of the type asked; the comment names
// each that is not ('Pillar key "k" is missing.' / 'is not <class 'int'>.').
asio::awaitable<json> check_pillar(state_call c) {
  static const std::pair<const char*, const char*> k_checks[] = {
      {"present", "None"},          {"boolean", "<class 'bool'>"},
      {"integer", "<class 'int'>"}, {"string", "(<class 'str'>,)"},
      {"listing", "<class 'list'>"}, {"dictionary", "<class 'dict'>"}};
  bool any = false;
  for (const auto& [arg, type] : k_checks) any = any || c.flag(arg);
  if (!any) throw base::error("Missing required argument text.");
  json ret = make_ret(c.name(), true, "");
  // Python dicts: a key seen again keeps its first place, takes the new value.
  json failed = json::object();
  json fine = json::object();
  for (const auto& [arg, type] : k_checks) {
    for (const auto& key : key_list(c, arg)) {
      nlohmann::json args = nlohmann::json::array({key, nullptr});
      std::string fun = "pillar.get";
      json value = co_await c.run(std::move(fun), std::move(args));
      if (value.is_null()) {
        failed[key] = "None";
        ret["result"] = false;
      } else if (!is_type(value, type)) {
        failed[key] = type;
        ret["result"] = false;
      } else if (c.flag("verbose")) {
        fine[key] = type;
      }
    }
  }
  std::string comment;
  for (const auto& [key, type] : failed.items()) {
    comment += "Pillar key \"" + key + "\" ";
    comment += type == "None" ? "is missing.\n" : "is not " + type.get<std::string>() + ".\n";
  }
  if (!fine.empty()) {
    comment += "Those keys passed the check:\n";
    for (const auto& [key, type] : fine.items()) {
      comment += "- " + key + " (" + type.get<std::string>() + ")\n";
    }
  }
  ret["comment"] = comment;
  co_return ret;
}

}  // namespace
}  // namespace test_states

void register_test_states(registry& reg) {
  using namespace test_states;
  reg.add("test.nop", succeed_without_changes, {"name"},
          "test.nop: does nothing and succeeds (a placeholder for requisites)");
  reg.add("test.succeed_without_changes", succeed_without_changes, {"name"},
          "test.succeed_without_changes: succeeds, changing nothing");
  reg.add("test.fail_without_changes", fail_without_changes, {"name"},
          "test.fail_without_changes: fails, changing nothing");
  reg.add("test.succeed_with_changes", succeed_with_changes, {"name"},
          "test.succeed_with_changes: succeeds with a pretended change (None under test)");
  reg.add("test.fail_with_changes", fail_with_changes, {"name"},
          "test.fail_with_changes: fails with a pretended change (None under test)");
  reg.add("test.configurable_test_state", configurable_test_state, {"name"},
          "test.configurable_test_state [changes=True|False|Random] [result=True|False|Random] "
          "[comment=] [warnings=] [allow_test_mode_failure=False]: the return you ask for");
  reg.add("test.show_notification", show_notification, {"name"},
          "test.show_notification text=TEXT: succeeds with TEXT as its comment");
  reg.add("test.mod_watch", mod_watch, {"name"},
          "test.mod_watch [result=] [comment=] [changes=]: what a watch requisite on a test "
          "state runs");
  reg.add("test.check_pillar", check_pillar, {"name"},
          "test.check_pillar [present=] [boolean=] [integer=] [string=] [listing=] "
          "[dictionary=] [verbose=False]: the pillar keys exist, of the type asked");
}

}  // namespace brine::states
