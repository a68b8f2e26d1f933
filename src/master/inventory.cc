#include "master/inventory.h"

#include <charconv>
#include <string>
#include <vector>

#include "master/accepted_view.h"

namespace brine::master {

using nlohmann::json;

namespace {

enum class source { builtin, grain, pillar };

struct field {
  source from = source::grain;
  std::vector<std::string> path;
};

json refusal(const std::string& why) {
  return {{"ok", false}, {"error", why}, {"bad_target", true}};
}

// Throws std::invalid_argument naming what is wrong.
std::vector<field> fields_of(const json& list) {
  if (!list.is_array()) throw std::invalid_argument("fields must be a list");
  std::vector<field> out;
  for (const auto& f : list) {
    if (!f.is_object()) throw std::invalid_argument("each field must be a mapping");
    field x;
    std::string from = f.value("from", "");
    if (from == "builtin") {
      x.from = source::builtin;
    } else if (from == "grain") {
      x.from = source::grain;
    } else if (from == "pillar") {
      x.from = source::pillar;
    } else {
      throw std::invalid_argument("a field's from must be builtin, grain or pillar, not '" + from +
                                  "'");
    }
    auto path = f.find("path");
    if (path == f.end() || !path->is_array() || path->empty()) {
      throw std::invalid_argument("a field's path must be a list of keys");
    }
    for (const auto& k : *path) {
      if (!k.is_string()) throw std::invalid_argument("a field's path holds strings only");
      x.path.push_back(k.get<std::string>());
    }
    out.push_back(std::move(x));
  }
  return out;
}

// As the CLI's lookup in a tree: an object's entry by key, a list's element
// by a decimal index; null when there is none.
json lookup(packed::value at, const std::vector<std::string>& path) {
  if (!at) return nullptr;
  for (const auto& key : path) {
    if (at.is_object()) {
      at = at.find(key);
    } else if (at.is_array()) {
      size_t index = 0;
      auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), index);
      if (ec != std::errc() || end != key.data() + key.size() || index >= at.size()) {
        return nullptr;
      }
      at = at.at(index);
    } else {
      return nullptr;
    }
    if (!at) return nullptr;
  }
  return at.to_json();
}

json builtin(const std::string& name, const std::string& id, const minion_cache::view& v,
             const pki::key_registry& keys, bool last_runs) {
  if (name == "id") return id;
  if (name == "key") return "accepted";
  if (name == "key.fingerprint") {
    auto k = keys.accepted(id);
    return k ? k->fingerprint : "";
  }
  if (name == "master") return std::string(v.master);
  if (name == "connected") return !v.master.empty();
  if (name == "last_seen") return v.last_seen == 0 ? json(nullptr) : json(v.last_seen);
  const minion_cache::run_summary* r = v.last_run;
  if (r == nullptr || !last_runs) return nullptr;  // last_run.*: no run known
  if (name == "last_run.status") return report::to_string(r->status);
  if (name == "last_run.started") return r->started_ms;
  if (name == "last_run.jid") return r->jid;
  if (name == "last_run.function") return r->fun;
  if (name == "last_run.test") return r->test;
  return nullptr;
}

}  // namespace

json answer_inventory(const json& request, const pki::key_registry& keys, const minion_cache& cache,
                      const target::nodegroups& groups, bool last_runs) {
  std::vector<field> fields;
  std::optional<target::expression> expr;
  try {
    fields = fields_of(request.value("fields", json::array()));
    auto kind = target::parse_type(request.value("tgt_type", "glob"));
    if (!kind) return refusal("unknown target type '" + request.value("tgt_type", "") + "'");
    std::string delimiter = request.value("delimiter", ":");
    expr = target::expression::parse(request.value("target", "*"), *kind, groups,
                                     delimiter.empty() ? ':' : delimiter.front());
  } catch (const std::exception& e) {
    return refusal(e.what());
  }
  // Answered from the cache, not by the minions: not greedy.
  auto matched = target::match(*expr, accepted_view(keys, cache), false);
  json rows = json::array();
  // The cache's lock, then the registry's (a fingerprint), as targeting
  // takes them.
  cache.read([&](const minion_cache::lookup& find) {
    for (const auto& id : matched.minions) {
      auto v = find(id);
      json row = json::array();
      for (const auto& f : fields) {
        switch (f.from) {
          case source::builtin:
            row.push_back(builtin(f.path.front(), id, v, keys, last_runs));
            break;
          case source::grain:
            row.push_back(lookup(v.grains, f.path));
            break;
          case source::pillar:
            row.push_back(lookup(v.pillar, f.path));
            break;
        }
      }
      rows.push_back(std::move(row));
    }
  });
  // last_runs: the last_run.* fields are answered here (a CLI that does not
  // see it reads them from the store, as it did from older masters).
  json out = {{"ok", true}, {"ids", std::move(matched.minions)}, {"rows", std::move(rows)}};
  if (last_runs) out["last_runs"] = true;
  return out;
}

}  // namespace brine::master
