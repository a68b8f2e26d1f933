#include <algorithm>
#include <cstdio>
#include <ctime>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "base/error.h"
#include "cli/api_client.h"
#include "cli/commands.h"
#include "cli/inventory.h"
#include "cli/output.h"
#include "packed/packed.h"
#include "proto/msgpack.h"
#include "store/store.h"
#include "target/target.h"

namespace brine::cli {

using nlohmann::json;
using ojson = nlohmann::ordered_json;
namespace msgpack = proto::msgpack;

namespace {

// "2025-01-31 14:00:00" (UTC); empty for 0 (never).
std::string utc_text(int64_t ms, bool with_ms) {
  if (ms == 0) return "";
  return utc_time(ms, with_ms ? time_unit::milliseconds : time_unit::seconds);
}

// One accepted minion as the store holds it.
struct minion {
  std::string id;
  const store::key_record* key = nullptr;
  const store::minion_data_record* data = nullptr;
  const report::report* last_run = nullptr;
  packed::document grains;  // the grains read (those the fields and target need)
  packed::document pillar;
};

// The minions for target::match: accepted ones only, with what was read.
class minions_view : public target::cache_view {
 public:
  explicit minions_view(const std::vector<minion>& all) : all_(all) {}
  void for_each(const visitor& fn) const override {
    for (const auto& m : all_) fn(m.id, {m.grains.root(), m.pillar.root()});
  }

 private:
  const std::vector<minion>& all_;
};

// A last_run.* field's value of `r` (null: no run reported).
json last_run_value(const std::string& name, const report::report* r) {
  if (!r) return nullptr;
  if (name == "last_run.status") return report::to_string(r->status);
  if (name == "last_run.started") return r->started_ms;
  if (name == "last_run.jid") return r->jid;
  if (name == "last_run.function") return r->fun;
  if (name == "last_run.test") return r->test;
  throw std::logic_error("inventory: built-in field " + name + " has no value");
}

bool is_last_run(const inventory::field& f) {
  return f.from == inventory::source::builtin && f.path.front().starts_with("last_run.");
}

// A built-in field's value as JSON and YAML print it (times as unix
// seconds and milliseconds).
json builtin_value(const std::string& name, const minion& m) {
  if (name == "id") return m.id;
  if (name == "key") return m.key ? store::to_string(m.key->state) : "";
  if (name == "key.fingerprint") return m.key ? m.key->fingerprint : "";
  std::string master = m.data ? m.data->master : "";
  if (name == "master") return master;
  if (name == "connected") return !master.empty();
  if (name == "last_seen") {
    int64_t s = m.data ? m.data->last_seen : 0;
    return s == 0 ? json(nullptr) : json(s);
  }
  return last_run_value(name, m.last_run);
}

json value_of(const inventory::field& f, const minion& m) {
  switch (f.from) {
    case inventory::source::builtin:
      return builtin_value(f.path.front(), m);
    case inventory::source::grain:
      return m.data && m.data->grains ? inventory::lookup(*m.data->grains, f.path) : json(nullptr);
    case inventory::source::pillar:
      return m.data && m.data->pillar ? inventory::lookup(*m.data->pillar, f.path) : json(nullptr);
  }
  return nullptr;
}

// A value's cell as table and CSV print it: times as UTC text, the rest as
// cell_text() prints it.
std::string human(const inventory::field& f, const json& v) {
  if (f.from == inventory::source::builtin) {
    const std::string& name = f.path.front();
    if (name == "last_seen") return v.is_number() ? utc_text(v.get<int64_t>() * 1000, false) : "";
    if (name == "last_run.started" && v.is_number()) return utc_text(v.get<int64_t>(), true);
  }
  return inventory::cell_text(v);
}

// The rows: the matched minions' ids, and each one's values (one per
// field, as JSON prints them), in id order.
struct matched_rows {
  std::vector<std::string> ids;
  std::vector<std::vector<json>> rows;
};

// Every last run (the store's), by minion.
std::vector<report::report> last_runs(store::store& db) {
  store::report_query rq;
  rq.last = true;
  rq.brief = true;
  rq.limit = std::numeric_limits<size_t>::max();
  return db.list_reports(rq);
}

// What the store holds: with the master down (or one that does not answer
// `inventory`), the CLI reads it itself.
matched_rows from_store(const base::master_config& cfg, const std::vector<inventory::field>& fields,
                        const target::expression& expr, bool want_pillar, bool want_runs) {
  // Only the top-level grains the fields and the target read.
  store::minion_data_query q;
  q.pillar = want_pillar || expr.uses_pillar();
  std::set<std::string> grain_keys;
  for (const auto& f : fields) {
    if (f.from == inventory::source::grain) grain_keys.insert(f.path.front());
  }
  if (auto keys = expr.grain_keys()) {
    grain_keys.insert(keys->begin(), keys->end());
    q.grains = std::vector<std::string>(grain_keys.begin(), grain_keys.end());
  }

  auto db = open_store(cfg, true);
  auto keys = db->load_keys();
  auto data = db->query_minion_data(q);
  std::vector<report::report> runs;
  if (want_runs) runs = last_runs(*db);

  std::map<std::string_view, const store::key_record*> accepted;
  for (const auto& k : keys) {
    if (k.state == store::key_state::accepted) accepted.emplace(k.id, &k);
  }
  std::map<std::string_view, const store::minion_data_record*> data_of;
  for (const auto& d : data) data_of.emplace(d.id, &d);
  std::map<std::string_view, const report::report*> run_of;
  for (const auto& r : runs) run_of.emplace(r.minion, &r);

  std::vector<minion> all;
  all.reserve(accepted.size());
  for (const auto& [id, key] : accepted) {
    minion m;
    m.id = std::string(id);
    m.key = key;
    if (auto it = data_of.find(id); it != data_of.end()) {
      m.data = it->second;
      if (expr.uses_grains() && m.data->grains) m.grains = packed::document(*m.data->grains);
      if (expr.uses_pillar() && m.data->pillar) m.pillar = packed::document(*m.data->pillar);
    }
    if (auto it = run_of.find(id); it != run_of.end()) m.last_run = it->second;
    all.push_back(std::move(m));
  }
  // Answered from the cache, not by the minions: a minion whose grains
  // (pillar) are not cached does not match a grain (pillar) term.
  auto matched = target::match(expr, minions_view(all), false);
  matched_rows out;
  for (const auto& m : all) {
    if (!std::binary_search(matched.minions.begin(), matched.minions.end(), m.id)) continue;
    std::vector<json> row;
    for (const auto& f : fields) row.push_back(value_of(f, m));
    out.ids.push_back(m.id);
    out.rows.push_back(std::move(row));
  }
  return out;
}

// The running master's answer, from what it holds in memory (the minion
// data cache with each minion's last run, and the keys):
// its rows as MessagePack, [[id, value per field], ...], read value by
// value (10,000 rows are not built as 80,000 trees to print a table).
struct master_answer {
  std::vector<uint8_t> rows;
  size_t count = 0;
};

// nullopt when no master answers on the local socket, or it is one that does
// not know `inventory` (or answers it in rows of an older form).
std::optional<master_answer> from_master(const base::master_config& cfg, const inventory_options& o,
                                         const std::vector<inventory::field>& fields) {
  auto client = api_client::connect(cfg.sock_dir);
  if (!client) return std::nullopt;
  json list = json::array();
  for (const auto& f : fields) {
    const char* from = f.from == inventory::source::builtin ? "builtin"
                       : f.from == inventory::source::grain ? "grain"
                                                            : "pillar";
    list.push_back({{"from", from}, {"path", f.path}});
  }
  json body = {{"target", o.target.empty() ? "*" : o.target},
               {"tgt_type", o.tgt_type},
               {"delimiter", o.delimiter.empty() ? ":" : o.delimiter},
               {"fields", std::move(list)}};
  json reply = client->request("inventory", std::move(body));
  if (!reply.value("ok", false)) {
    std::string why = reply.value("error", "the master could not answer");
    if (reply.value("bad_target", false)) throw inventory::usage_error(why);
    if (why.starts_with("unknown local API op")) return std::nullopt;  // an older master
    throw base::error("the master: " + why);
  }
  auto rows = reply.find("rows_msgpack");
  if (rows == reply.end() || !rows->is_binary()) return std::nullopt;  // an older master
  master_answer out;
  out.rows = std::move(rows->get_binary());
  out.count = reply.value("count", size_t{0});
  return out;
}

// Reads the master's rows, checking their shape; `cell(row, field, r)` reads
// each value from `r`.
void read_rows(const master_answer& m, size_t fields,
               const std::function<void(const std::string& id)>& row,
               const std::function<void(size_t field, msgpack::reader& r)>& cell) {
  auto bad = [](const std::string& why) {
    return base::error("the master's inventory answer is malformed: " + why);
  };
  msgpack::reader r(m.rows);
  auto top = r.next();
  if (top.type != msgpack::kind::array || top.count != m.count) {
    throw bad("not a list of " + std::to_string(m.count) + " rows");
  }
  for (uint32_t i = 0; i < top.count; ++i) {
    auto head = r.next();
    if (head.type != msgpack::kind::array || head.count != fields + 1) {
      throw bad("row " + std::to_string(i) + " does not hold an id and " + std::to_string(fields) +
                " values");
    }
    auto id = r.next();
    if (id.type != msgpack::kind::string) throw bad("row " + std::to_string(i) + " has no id");
    row(std::string(id.bytes));
    for (size_t k = 0; k < fields; ++k) cell(k, r);
  }
  if (!r.done()) throw bad("bytes follow the rows");
}

// The rows as JSON values (for --out json and yaml).
matched_rows rows_of(const master_answer& m, const std::vector<inventory::field>& fields) {
  matched_rows out;
  out.ids.reserve(m.count);
  out.rows.reserve(m.count);
  read_rows(
      m, fields.size(),
      [&](const std::string& id) {
        out.ids.push_back(id);
        out.rows.emplace_back().reserve(fields.size());
      },
      [&](size_t, msgpack::reader& r) {
        auto bytes = r.skip();
        out.rows.back().push_back(json::from_msgpack(bytes.begin(), bytes.end()));
      });
  return out;
}

// One value as human() prints it, read from the master's rows.
std::string cell_of(const inventory::field& f, msgpack::reader& r) {
  msgpack::reader probe = r;
  auto it = probe.next();
  const bool builtin = f.from == inventory::source::builtin;
  const bool seen = builtin && f.path.front() == "last_seen";            // unix seconds
  const bool started = builtin && f.path.front() == "last_run.started";  // unix ms
  switch (it.type) {
    case msgpack::kind::nil:
      r = probe;
      return "";
    case msgpack::kind::string:
      r = probe;
      return std::string(it.bytes);
    case msgpack::kind::boolean:
      r = probe;
      return it.boolean ? "true" : "false";
    case msgpack::kind::integer:
    case msgpack::kind::unsigned_integer: {
      r = probe;
      auto v = it.type == msgpack::kind::integer ? it.integer
                                                 : static_cast<int64_t>(it.unsigned_integer);
      if (seen) return utc_text(v * 1000, false);
      if (started) return utc_text(v, true);
      return it.type == msgpack::kind::integer ? std::to_string(it.integer)
                                               : std::to_string(it.unsigned_integer);
    }
    default: {  // a float, a list, a mapping: as JSON prints it
      auto bytes = r.skip();
      return human(f, json::from_msgpack(bytes.begin(), bytes.end()));
    }
  }
}

// The table's or CSV's lines from the master's rows, without a tree per value.
std::vector<std::vector<std::string>> cells_of(const master_answer& m,
                                               const std::vector<inventory::field>& fields) {
  std::vector<std::vector<std::string>> out;
  out.reserve(m.count + 1);
  auto& header = out.emplace_back();
  for (const auto& f : fields) header.push_back(f.name);
  read_rows(
      m, fields.size(), [&](const std::string&) { out.emplace_back().reserve(fields.size()); },
      [&](size_t k, msgpack::reader& r) { out.back().push_back(cell_of(fields[k], r)); });
  return out;
}

int inventory_run(const base::master_config& cfg, const inventory_options& o) {
  auto fields = inventory::parse_fields(o.fields.empty() ? inventory::k_default_fields : o.fields);

  // Pillar is shown only when named, and only the keys the master's
  // configuration lets the inventory print.
  bool want_pillar = false;
  for (const auto& f : fields) {
    if (f.from != inventory::source::pillar) continue;
    want_pillar = true;
    if (!inventory::pillar_allowed(f.path, cfg.inventory_pillar_keys)) {
      throw inventory::usage_error(
          "field '" + f.name + "': pillar key '" + f.name.substr(7) +
          "' is not in inventory_pillar_keys of " + cfg.source +
          "; pillar may hold secrets, so the inventory prints only the keys listed there "
          "(e.g. inventory_pillar_keys: [role, 'dns.*'])");
    }
  }

  auto kind = target::parse_type(o.tgt_type);
  if (!kind) throw inventory::usage_error("unknown target type '" + o.tgt_type + "'");
  std::optional<target::expression> expr;
  try {
    expr = target::expression::parse(o.target.empty() ? "*" : o.target, *kind,
                                     target::nodegroups_from_json(cfg.nodegroups),
                                     o.delimiter.empty() ? ':' : o.delimiter.front());
  } catch (const target::error& e) {
    throw inventory::usage_error(e.what());
  }
  const bool want_runs = std::any_of(fields.begin(), fields.end(), is_last_run);

  const bool lines = o.out != "json" && o.out != "yaml";
  std::optional<matched_rows> got;
  std::vector<std::vector<std::string>> cells;  // the header, then a line per minion
  if (auto m = from_master(cfg, o, fields)) {
    if (lines) {
      cells = cells_of(*m, fields);
    } else {
      got = rows_of(*m, fields);
    }
  } else {
    got = from_store(cfg, fields, *expr, want_pillar, want_runs);
  }

  if (o.out == "json" || o.out == "yaml") {
    ojson out = ojson::array();
    for (const auto& values : got->rows) {
      ojson row = ojson::object();
      for (size_t k = 0; k < fields.size(); ++k) row[fields[k].name] = values[k];
      out.push_back(std::move(row));
    }
    if (o.out == "json") {
      std::cout << out.dump(4, ' ', false, ojson::error_handler_t::replace) << "\n";
    } else {
      std::cout << yaml_out("minions", plain_json(out));
    }
    return 0;
  }
  if (got) {
    cells.reserve(got->rows.size() + 1);
    auto& header = cells.emplace_back();
    for (const auto& f : fields) header.push_back(f.name);
    for (const auto& values : got->rows) {
      auto& line = cells.emplace_back();
      line.reserve(fields.size());
      for (size_t k = 0; k < fields.size(); ++k) line.push_back(human(fields[k], values[k]));
    }
  }
  if (o.out == "csv") {
    for (const auto& line : cells) std::cout << inventory::csv_row(line);
    return 0;
  }
  if (cells.size() <= 1) {
    std::cout << "no minions match\n";
    return 0;
  }
  std::cout << inventory::table(cells);
  return 0;
}

}  // namespace

int inventory_command(const base::master_config& cfg, const inventory_options& o) {
  try {
    return inventory_run(cfg, o);
  } catch (const inventory::usage_error& e) {
    std::cerr << "brine inventory: " << e.what() << "\n";
    return 3;
  }
}

}  // namespace brine::cli
