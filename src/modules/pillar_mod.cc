// The pillar module: Salt's pillar.* over the pillar the master compiled for
// this minion (sent to it alone).

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "base/error.h"
#include "modules/arguments.h"
#include "modules/context.h"
#include "modules/data.h"
#include "modules/registry.h"

namespace brine::modules {
namespace pillar_mod {
namespace {

constexpr auto instant = registry::kind::instant;

using json = nlohmann::json;

std::shared_ptr<const json> pillar_of(const call& c) {
  auto p = need_context(c).pillar();
  return p ? p : std::make_shared<const json>(json::object());
}

// A text option of the minion, as Salt's __opts__.get(name); nullopt when it
// is absent or None.
std::optional<std::string> opt_text(const json& opts, const char* name) {
  auto it = opts.find(name);
  if (it == opts.end() || it->is_null()) return std::nullopt;
  return it->is_string() ? it->get<std::string>() : it->dump();
}

bool opt_flag(const json& opts, const char* name) {
  auto it = opts.find(name);
  return it != opts.end() && it->is_boolean() && it->get<bool>();
}

// The pillar a function with pillarenv= and saltenv= reads, as Salt's
// pillar.items picks it: neither given (pillar.get, pillar.item) is the
// pillar the minion holds; otherwise one compiled now, for the pillarenv
// argument, else the saltenv argument where the minion has
// pillarenv_from_saltenv, else the minion's own pillarenv option. A pillar
// compiled now for the minion's own environments is what fresh_pillar()
// gives; one for another environment brine's minion cannot compile, so that
// fails naming the argument rather than answer from the wrong pillar.
asio::awaitable<std::shared_ptr<const json>> pillar_for(call c, const arguments& s,
                                                        bool always_fresh) {
  const json* pillarenv_arg = s.get("pillarenv");
  const json* saltenv_arg = s.get("saltenv");
  if (!always_fresh && pillarenv_arg == nullptr && saltenv_arg == nullptr) {
    co_return pillar_of(c);
  }
  auto& ctx = need_context(c);
  const json& opts = ctx.opts();
  std::optional<std::string> env;
  std::string from;
  if (pillarenv_arg != nullptr) {
    env = s.text_of("pillarenv", *pillarenv_arg);
    from = "pillarenv";
  } else if (opt_flag(opts, "pillarenv_from_saltenv")) {
    if (saltenv_arg != nullptr) {
      env = s.text_of("saltenv", *saltenv_arg);
      from = "saltenv";
    } else {
      env = opt_text(opts, "saltenv");
      from = "the minion's saltenv option";
    }
  } else {
    env = opt_text(opts, "pillarenv");
    from = "the minion's pillarenv option";
  }
  if (env && !env->empty() && env != opt_text(opts, "pillarenv")) {
    std::string named = from == "pillarenv" || from == "saltenv" ? from + "='" + *env + "'"
                                                                  : from + " ('" + *env + "')";
    s.fail(named +
           " asks for a pillar compiled for that environment alone, which brine's minion cannot "
           "compile on request (Salt asks its master for one); leave it out to read this "
           "minion's pillar (all of its environments)");
  }
  auto data = co_await ctx.fresh_pillar();
  co_return data ? data : pillar_of(c);
}

asio::awaitable<outcome> item(call c);

// Salt's pillar.items: a pillar compiled now (the minion asks its master;
// the kept one is left as it is), where pillar.raw, get, item and ls read the
// pillar the minion holds. Positional keys make it pillar.item (Salt keeps
// that for backwards compatibility); pillar= is merged over the compiled
// pillar, as Salt's pillar_override.
asio::awaitable<outcome> items(call c) {
  arguments s("pillar.items", c, {"pillar", "pillarenv", "saltenv", "pillar_enc"}, true);
  if (!s.rest().empty()) co_return co_await item(std::move(c));
  const json* override = s.get("pillar");
  if (override != nullptr && !override->is_object()) {
    s.fail("pillar must be a mapping of pillar keys to values, got " + override->dump());
  }
  if (s.get("pillar_enc") != nullptr) {
    s.fail("pillar_enc: brine cannot decrypt a pillar override (Salt's gpg renderer); pass the "
           "pillar= values in clear or leave pillar_enc out");
  }
  auto data = co_await pillar_for(c, s, true);
  if (override == nullptr || override->empty()) co_return outcome{*data};
  json merged = *data;
  dict_update(merged, *override, opt_flag(need_context(c).opts(), "pillar_merge_lists"));
  co_return outcome{std::move(merged)};
}

asio::awaitable<outcome> raw(call c) {
  arguments s("pillar.raw", c, {"key"});
  auto data = pillar_of(c);
  const json* key = s.given("key");
  if (key == nullptr) co_return outcome{*data};
  // Salt's __pillar__.get(key, {}): a top-level key, no ':' walk.
  auto it = data->find(s.scalar_text("key", ""));
  co_return outcome{it != data->end() ? *it : json::object()};
}

// Python's type(x).__name__, for the messages Salt logs.
const char* py_type(const json& v) {
  switch (v.type()) {
    case json::value_t::object: return "dict";
    case json::value_t::array: return "list";
    case json::value_t::string: return "str";
    case json::value_t::boolean: return "bool";
    case json::value_t::number_float: return "float";
    case json::value_t::null: return "NoneType";
    default: return "int";
  }
}

// Salt's pillar.get. With merge, a dict default has the value merged into
// it and a list default gets the value's items it lacks; other pairings are
// logged and the value returned as it is.
asio::awaitable<outcome> get(call c) {
  arguments s(
      "pillar.get", c,
      {"key", "default", "merge", "merge_nested_lists", "delimiter", "pillarenv", "saltenv"});
  if (s.given("key") == nullptr)
    throw base::error("pillar.get needs a key: pillar.get users:alice");
  std::string key = s.scalar_text("key", "");
  std::string delimiter = s.scalar_text("delimiter", ":");
  const json& opts = need_context(c).opts();
  auto p = co_await pillar_for(c, s, false);
  const auto* v = traverse(*p, key, delimiter);
  const json* fallback = s.given("default");
  if (fallback == nullptr && v == nullptr && opt_flag(opts, "pillar_raise_on_missing")) {
    s.fail("Pillar key not found: " + key);
  }
  json dflt = fallback ? *fallback : json("");
  bool merge_lists = s.get("merge_nested_lists") != nullptr
                         ? s.flag("merge_nested_lists", false)
                         : opt_flag(opts, "pillar_merge_lists");
  if (s.flag("merge", false)) {
    if (dflt.is_object()) {
      json found = v ? *v : json::object();
      if (found.is_object()) {
        dict_update(dflt, found, merge_lists);
        co_return outcome{std::move(dflt)};
      }
      spdlog::error(
          "pillar.get: Default ({}) is a dict, but the returned pillar value ({}) is of type "
          "'{}'. Merge will be skipped.",
          dflt.dump(), found.dump(), py_type(found));
    } else if (dflt.is_array()) {
      json found = v ? *v : json::array();
      if (found.is_array()) {
        json added = json::array();
        for (const auto& x : found) {
          if (std::find(dflt.begin(), dflt.end(), x) == dflt.end()) added.push_back(x);
        }
        for (auto& x : added) dflt.push_back(std::move(x));
        co_return outcome{std::move(dflt)};
      }
      spdlog::error(
          "pillar.get: Default ({}) is a list, but the returned pillar value ({}) is of type "
          "'{}'. Merge will be skipped.",
          dflt.dump(), found.dump(), py_type(found));
    } else {
      spdlog::error(
          "pillar.get: Default ({}) is of type '{}', must be a dict or list to merge. Merge will "
          "be skipped.",
          dflt.dump(), py_type(dflt));
    }
  }
  co_return outcome{v ? *v : dflt};
}

asio::awaitable<outcome> item(call c) {
  arguments s("pillar.item", c, {"default", "delimiter", "pillarenv", "saltenv"}, true);
  auto p = co_await pillar_for(c, s, false);
  co_return outcome{items_at(*p, s)};
}

asio::awaitable<outcome> ls(call c) {
  arguments s("pillar.ls", c, {}, true);
  json names = json::array();
  auto data = pillar_of(c);  // kept alive through the loop
  for (const auto& [k, v] : data->items()) names.push_back(k);
  co_return outcome{std::move(names)};
}

}  // namespace
}  // namespace pillar_mod

void register_pillar_module(registry& reg) {
  using namespace pillar_mod;
  reg.add("pillar.items", items,
          "pillar.items [pillar={...}] [pillarenv=ENV] [saltenv=ENV]: the pillar compiled now "
          "for this minion: the minion asks its master (the pillar it keeps is left as it is; "
          "with no master answering, that one), with pillar= merged over it. A pillarenv other "
          "than the minion's own is refused: brine's minion cannot have a pillar compiled for "
          "one environment on request.\n\nCLI example: brine cmd '*' pillar.items");
  reg.add("pillar.raw", raw,
          "pillar.raw [key=KEY]: the pillar this minion holds, as the master last sent it "
          "(saltutil.refresh_pillar asks again), or its top-level KEY ({} if absent).\n\nCLI example: brine "
          "cmd '*' pillar.raw key=users",
          instant);
  // Not instant: with saltenv= they wait for a pillar compiled now.
  reg.add("pillar.get", get,
          "pillar.get KEY [default=''] [merge=False] [merge_nested_lists] [delimiter=':'] "
          "[pillarenv=ENV] [saltenv=ENV]: a pillar value; ':' walks into nested maps and lists; "
          "with merge, the value is merged into a map default (a list default gets the items it "
          "lacks). With saltenv= the pillar is compiled now; a pillarenv other than the minion's "
          "own is refused, as for pillar.items.\n\nCLI example: brine cmd '*' pillar.get "
          "users:alice:uid default=1000");
  reg.add("pillar.item", item,
          "pillar.item KEY... [default=''] [delimiter=':'] [pillarenv=ENV] [saltenv=ENV]: a map "
          "of the named pillar keys (pillarenv and saltenv as for pillar.get).\n\nCLI example: "
          "brine cmd '*' pillar.item users apps");
  reg.add("pillar.ls", ls,
          "pillar.ls: the sorted top-level pillar keys.\n\nCLI example: brine cmd '*' pillar.ls",
          instant);
}

}  // namespace brine::modules
