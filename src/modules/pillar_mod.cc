// The pillar module: Salt's pillar.* over the pillar the master compiled for
// this minion (sent to it alone), and config.get over options, grains and
// pillar.

#include "base/error.h"
#include "modules/arguments.h"
#include "modules/context.h"
#include "modules/data.h"
#include "modules/registry.h"

namespace brine::modules {
namespace {

constexpr auto instant = registry::kind::instant;

std::shared_ptr<const nlohmann::json> pillar_of(const call& c) {
  auto p = need_context(c).pillar();
  return p ? p : std::make_shared<const nlohmann::json>(nlohmann::json::object());
}

// Salt's pillar.items: a pillar compiled now (the minion asks its master;
// the kept one is left as it is), where pillar.raw, get, item and ls read the
// pillar the minion holds.
asio::awaitable<outcome> items(call c) {
  arguments s("pillar.items", c, {"pillar", "pillarenv", "pillar_enc"}, true);
  auto data = co_await need_context(c).fresh_pillar();
  if (!data) data = pillar_of(c);
  co_return outcome{*data};
}

asio::awaitable<outcome> raw(call c) {
  arguments s("pillar.raw", c, {"key"});
  auto data = pillar_of(c);
  const nlohmann::json* key = s.given("key");
  if (key == nullptr) co_return outcome{*data};
  // Salt's __pillar__.get(key, {}): a top-level key, no ':' walk.
  auto it = data->find(s.scalar_text("key", ""));
  co_return outcome{it != data->end() ? *it : nlohmann::json::object()};
}

// Salt's pillar.get: with merge, a map default is merged under the value.
asio::awaitable<outcome> get(call c) {
  arguments s(
      "pillar.get", c,
      {"key", "default", "merge", "merge_nested_lists", "delimiter", "pillarenv", "saltenv"});
  if (s.given("key") == nullptr)
    throw base::error("pillar.get needs a key: pillar.get users:alice");
  std::string key = s.scalar_text("key", "");
  auto p = pillar_of(c);
  const auto* v = traverse(*p, key, s.scalar_text("delimiter", ":"));
  const nlohmann::json* fallback = s.given("default");
  nlohmann::json dflt = fallback ? *fallback : nlohmann::json("");
  if (s.flag("merge", false)) {
    if (v == nullptr) co_return outcome{dflt};
    if (dflt.is_object() && v->is_object()) {
      nlohmann::json merged = dflt;
      dict_update(merged, *v, s.flag("merge_nested_lists", false));
      co_return outcome{std::move(merged)};
    }
    if (dflt.is_array() && v->is_array()) {
      nlohmann::json merged = dflt;
      for (const auto& item : *v) merged.push_back(item);
      co_return outcome{std::move(merged)};
    }
    if (fallback != nullptr && dflt.type() != v->type()) {
      throw base::error("pillar.get: default and pillar value of '" + key +
                        "' must both be dictionaries or lists to merge");
    }
  }
  co_return outcome{v ? *v : dflt};
}

asio::awaitable<outcome> item(call c) {
  arguments s("pillar.item", c, {"default", "delimiter", "pillarenv", "saltenv"}, true);
  co_return outcome{items_at(*pillar_of(c), s)};
}

asio::awaitable<outcome> ls(call c) {
  arguments s("pillar.ls", c, {}, true);
  nlohmann::json names = nlohmann::json::array();
  auto data = pillar_of(c);  // kept alive through the loop
  for (const auto& [k, v] : data->items()) names.push_back(k);
  co_return outcome{std::move(names)};
}

// Salt's config.get: the minion options, then grains, then pillar (and the
// master's options under pillar 'master', which brine does not send).
asio::awaitable<outcome> config_get(call c) {
  arguments s("config.get", c,
              {"key", "default", "delimiter", "merge", "omit_opts", "omit_pillar", "omit_master",
               "omit_grains"});
  if (s.given("key") == nullptr) throw base::error("config.get needs a key: config.get pki_dir");
  std::string key = s.scalar_text("key", "");
  std::string delimiter = s.scalar_text("delimiter", ":");
  auto& ctx = need_context(c);
  auto grains = ctx.grains();
  auto pillar = ctx.pillar();
  std::string merge = s.scalar_text("merge", "");
  const nlohmann::json* fallback = s.given("default");
  nlohmann::json dflt = fallback ? *fallback : nlohmann::json("");
  std::vector<const nlohmann::json*> sources;
  if (!s.flag("omit_opts", false)) sources.push_back(&ctx.opts());
  if (grains && !s.flag("omit_grains", false)) sources.push_back(grains.get());
  if (pillar && !s.flag("omit_pillar", false)) sources.push_back(pillar.get());
  if (merge.empty()) {
    for (const auto* src : sources) {
      if (const auto* v = traverse(*src, key, delimiter)) co_return outcome{*v};
    }
    co_return outcome{dflt};
  }
  if (merge != "recurse" && merge != "overwrite") {
    throw base::error("config.get: merge must be recurse or overwrite, got '" + merge + "'");
  }
  // Merged from the lowest precedence up: pillar, grains, options.
  nlohmann::json ret;
  for (auto it = sources.rbegin(); it != sources.rend(); ++it) {
    const auto* v = traverse(**it, key, delimiter);
    if (v == nullptr) continue;
    if (ret.is_null() || merge == "overwrite" || !ret.is_object() || !v->is_object()) {
      if (ret.is_object() && v->is_object() && merge == "overwrite") {
        for (const auto& [k, val] : v->items()) ret[k] = val;
      } else {
        ret = *v;
      }
    } else {
      dict_update(ret, *v);
    }
  }
  co_return outcome{ret.is_null() ? dflt : ret};
}

}  // namespace

void register_pillar_module(registry& reg) {
  reg.add("pillar.items", items,
          "pillar.items: the pillar compiled now for this minion: the minion asks its master "
          "(the pillar it keeps is left as it is; with no master answering, that one).\n\nCLI "
          "example: brine cmd '*' pillar.items");
  reg.add("pillar.raw", raw,
          "pillar.raw [key=KEY]: the pillar this minion holds, as the master last sent it "
          "(saltutil.refresh_pillar asks again), or its top-level KEY ({} if absent).\n\nCLI example: brine "
          "cmd '*' pillar.raw key=users",
          instant);
  reg.add("pillar.get", get,
          "pillar.get KEY [default=''] [merge=False] [delimiter=':']: a pillar value; ':' walks "
          "into nested maps and lists; with merge, a map default is merged under it.\n\nCLI "
          "example: brine cmd '*' pillar.get users:alice:uid default=1000",
          instant);
  reg.add("pillar.item", item,
          "pillar.item KEY... [default='']: a map of the named pillar keys.\n\nCLI example: "
          "brine cmd '*' pillar.item users apps",
          instant);
  reg.add("pillar.ls", ls,
          "pillar.ls: the sorted top-level pillar keys.\n\nCLI example: brine cmd '*' pillar.ls",
          instant);
  reg.add("config.get", config_get,
          "config.get KEY [default=''] [delimiter=':'] [merge=recurse|overwrite]: the first of "
          "the minion's options, grains and pillar that has KEY.\n\nCLI example: brine cmd '*' "
          "config.get master",
          instant);
}

}  // namespace brine::modules
