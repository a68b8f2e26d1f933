#include "master/inventory.h"

#include <charconv>
#include <string>
#include <vector>

#include "proto/msgpack.h"

namespace brine::master {

using nlohmann::json;
namespace msgpack = proto::msgpack;

namespace {

enum class source { builtin, grain, pillar };

struct field {
  source from = source::grain;
  std::vector<std::string> path;
  std::vector<uint32_t> hashes;  // packed::key_hash of each key, once per answer
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
      x.hashes.push_back(packed::key_hash(x.path.back()));
    }
    out.push_back(std::move(x));
  }
  return out;
}

// As the CLI's lookup in a tree: an object's entry by key, a list's element
// by a decimal index; absent when there is none.
packed::value lookup(packed::value at, const field& f) {
  if (!at) return {};
  for (size_t i = 0; i < f.path.size(); ++i) {
    const std::string& key = f.path[i];
    if (at.is_object()) {
      at = at.find(key, f.hashes[i]);
    } else if (at.is_array()) {
      size_t index = 0;
      auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), index);
      if (ec != std::errc() || end != key.data() + key.size() || index >= at.size()) {
        return {};
      }
      at = at.at(index);
    } else {
      return {};
    }
    if (!at) return {};
  }
  return at;
}

// A cached value as MessagePack (absent: nil).
void write(msgpack::writer& w, packed::value v) {
  if (!v) return w.nil();
  switch (v.type()) {
    case packed::kind::null:
      return w.nil();
    case packed::kind::boolean:
      return w.boolean(v.boolean());
    case packed::kind::integer:
      return w.integer(v.integer());
    case packed::kind::unsigned_integer:
      return w.unsigned_integer(v.unsigned_integer());
    case packed::kind::floating:
      return w.floating(v.floating());
    case packed::kind::string:
      return w.string(v.string());
    case packed::kind::array:
      w.array(static_cast<uint32_t>(v.size()));
      for (auto it = v.begin(); it != v.end(); ++it) write(w, *it);
      return;
    case packed::kind::object:
      w.map(static_cast<uint32_t>(v.size()));
      for (auto it = v.begin(); it != v.end(); ++it) {
        w.string(it.key());
        write(w, *it);
      }
      return;
  }
}

void write_builtin(msgpack::writer& w, const std::string& name, const std::string& id,
                   const minion_cache::view& v, const pki::key_registry& keys) {
  if (name == "id") return w.string(id);
  if (name == "key") return w.string("accepted");
  if (name == "key.fingerprint") {
    auto k = keys.accepted(id);
    return w.string(k ? k->fingerprint : "");
  }
  if (name == "master") return w.string(v.master);
  if (name == "connected") return w.boolean(!v.master.empty());
  if (name == "last_seen") return v.last_seen == 0 ? w.nil() : w.integer(v.last_seen);
  const minion_cache::run_summary* r = v.last_run;
  if (r == nullptr) return w.nil();  // last_run.*: no run known
  if (name == "last_run.status") return w.string(report::to_string(r->status));
  if (name == "last_run.started") return w.integer(r->started_ms);
  if (name == "last_run.jid") return w.string(r->jid);
  if (name == "last_run.function") return w.string(r->fun);
  if (name == "last_run.test") return w.boolean(r->test);
  w.nil();
}

// The accepted minions for target::match, each looked up once in a read
// the caller holds: the views are kept, in the order visited, for the rows.
struct seen {
  std::vector<std::string> ids;
  std::vector<minion_cache::view> views;
};
class seen_view : public target::cache_view {
 public:
  seen_view(const pki::key_registry& keys, const minion_cache::lookup& find, seen& out)
      : keys_(keys), find_(find), out_(out) {}
  void for_each(const visitor& fn) const override {
    keys_.for_each_accepted([&](const std::string& id) {
      auto v = find_(id);
      out_.ids.push_back(id);
      out_.views.push_back(v);
      fn(id, target::minion_data{v.grains, v.pillar});
    });
  }

 private:
  const pki::key_registry& keys_;
  const minion_cache::lookup& find_;
  seen& out_;
};

}  // namespace

json answer_inventory(const json& request, const pki::key_registry& keys, const minion_cache& cache,
                      const target::nodegroups& groups) {
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
  // [[id, value per field], ...] written as MessagePack as it is read:
  // 10,000 minions' rows are not 70,000 trees.
  std::vector<uint8_t> rows;
  msgpack::writer w(rows);
  size_t count = 0;
  // One shared lock of the cache, then the registry's, as targeting takes
  // them; each minion is looked up once, for the match and its row.
  cache.read([&](const minion_cache::lookup& find) {
    seen visited;
    // Answered from the cache, not by the minions: not greedy.
    auto matched = target::match(*expr, seen_view(keys, find, visited), false);
    count = matched.minions.size();
    rows.reserve(count * (16 + 24 * fields.size()));
    w.array(static_cast<uint32_t>(count));
    size_t at = 0;  // both in id order: the registry walks its keys sorted
    for (const auto& id : matched.minions) {
      while (at < visited.ids.size() && visited.ids[at] != id) ++at;
      const minion_cache::view v = at < visited.ids.size() ? visited.views[at] : find(id);
      w.array(static_cast<uint32_t>(1 + fields.size()));
      w.string(id);
      for (const auto& f : fields) {
        switch (f.from) {
          case source::builtin:
            write_builtin(w, f.path.front(), id, v, keys);
            break;
          case source::grain:
            write(w, lookup(v.grains, f));
            break;
          case source::pillar:
            write(w, lookup(v.pillar, f));
            break;
        }
      }
    }
  });
  return {{"ok", true}, {"count", count}, {"rows_msgpack", json::binary(std::move(rows))}};
}

}  // namespace brine::master
