// Salt's postgres ext_pillar (salt/pillar/postgres.py over sql_base.py):
// SQL queries for each minion ("%s" its id, bound as a parameter), whose
// rows become nested pillar keys, column values as keys down to `depth`.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>

#include "base/error.h"
#include "base/python_truth.h"
#include "ext_pillar/arguments.h"
#include "ext_pillar/ext_pillar.h"
#include "pq/libpq.h"

namespace brine::ext_pillar {

using nlohmann::ordered_json;

namespace sql {
namespace {

struct query {
  std::string root;  // "" for a positional query (shared top level)
  std::string text;
  int depth = 0;
  bool as_list = false;
  std::vector<int> with_lists;
  bool ignore_null = false;
};

// Salt's extract_queries: positional ones first, then the named ones
// sorted by name; what is not a query is left out.
std::vector<query> extract_queries(const ordered_json& config) {
  std::vector<std::pair<std::string, ordered_json>> buffer;
  if (config.is_array()) {
    for (const auto& a : config) buffer.emplace_back("", a);
  } else if (config.is_object()) {
    std::vector<std::string> names;
    for (const auto& [k, v] : config.items()) names.push_back(k);
    std::sort(names.begin(), names.end());
    for (const auto& k : names) buffer.emplace_back(k, config[k]);
  } else {
    buffer.emplace_back("", config);
  }
  std::vector<query> out;
  for (const auto& [root, d] : buffer) {
    query q;
    q.root = root;
    if (d.is_string() && !d.get<std::string>().empty()) {
      q.text = d.get<std::string>();
    } else if (d.is_array() && !d.empty() && base::python_truth(d[0])) {
      q.text = detail::text_of(d[0]);
      if (d.size() > 1 && d[1].is_number_integer()) q.depth = d[1].get<int>();
    } else if (d.is_object() && d.contains("query") && base::python_truth(d["query"])) {
      q.text = detail::text_of(d["query"]);
      if (auto v = d.find("depth"); v != d.end() && v->is_number_integer()) q.depth = v->get<int>();
      if (auto v = d.find("as_list"); v != d.end()) q.as_list = base::python_truth(*v);
      if (auto v = d.find("ignore_null"); v != d.end()) q.ignore_null = base::python_truth(*v);
      if (auto v = d.find("with_lists"); v != d.end()) {
        if (v->is_string()) {
          std::string s = v->get<std::string>();
          for (size_t at = 0; at <= s.size();) {
            size_t comma = std::min(s.find(',', at), s.size());
            try {
              q.with_lists.push_back(std::stoi(s.substr(at, comma - at)));
            } catch (const std::exception&) {
              throw base::error("with_lists: invalid literal for int() with base 10: '" +
                                s.substr(at, comma - at) + "'");
            }
            at = comma + 1;
          }
        } else if (v->is_array()) {
          for (const auto& i : *v) {
            if (i.is_number_integer()) q.with_lists.push_back(i.get<int>());
          }
        }
      }
    } else {
      continue;
    }
    out.push_back(std::move(q));
  }
  return out;
}

// psycopg2's paramstyle: "%s" is the parameter, "%%" a percent sign.
std::string to_dollar_params(const std::string& text, int& count) {
  std::string out;
  count = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 1 < text.size() && text[i + 1] == 's') {
      out += "$1";
      ++count;
      ++i;
    } else if (text[i] == '%' && i + 1 < text.size() && text[i + 1] == '%') {
      out += '%';
      ++i;
    } else {
      out += text[i];
    }
  }
  return out;
}

// A column value as psycopg2 gives it: numbers and booleans typed, NULL
// None, json parsed, the rest text.
ordered_json typed(const char* v, int len, unsigned oid, bool null) {
  if (null) return nullptr;
  std::string s(v, static_cast<size_t>(len));
  try {
    switch (oid) {
      case 16: return s == "t";                                         // bool
      case 20: case 21: case 23: case 26: return std::stoll(s);        // int8 int2 int4 oid
      case 700: case 701: case 1700: return std::stod(s);              // float4 float8 numeric
      case 114: case 3802: return ordered_json::parse(s);              // json jsonb
      default: return s;
    }
  } catch (const std::exception&) {
    return s;
  }
}

using row = std::vector<ordered_json>;

// Salt's SqlBaseExtPillar.process_results for one query's rows into `focus`.
class shaper {
 public:
  shaper(const query& q, std::vector<std::string> fields)
      : q_(q), fields_(std::move(fields)), n_(static_cast<int>(fields_.size())) {
    depth_ = q.depth;
    if (depth_ == 0 || depth_ >= n_) depth_ = n_ - 1;
  }

  void add(ordered_json& focus, const row& r) {
    if (n_ < 2) return;
    ordered_json* crd = &focus;
    std::string path;  // crd's JSON pointer from focus
    for (int i = 0; i < depth_ - 1; ++i) {
      std::string key = key_of(r[i]);
      if (listed(i + 1)) remember(path, key);
      path += "/" + escape(key);
      auto at = crd->find(key);
      if (at == crd->end()) {
        crd = &((*crd)[key] = ordered_json::object());
      } else if (at->is_array()) {
        at->push_back(ordered_json::object());
        path += "/" + std::to_string(at->size() - 1);
        crd = &at->back();
      } else if (!at->is_object()) {
        if (q_.as_list) {
          *at = ordered_json::array({*at, ordered_json::object()});
          path += "/1";
          crd = &at->back();
        } else {
          crd = &(*at = ordered_json::object());
        }
      } else {
        crd = &*at;
      }
    }
    if (depth_ == n_ - 1) {
      int nk = n_ - 2;
      std::string key = key_of(r[nk]);
      const ordered_json& value = r[n_ - 1];
      if ((q_.as_list && crd->contains(key)) || listed(nk + 1)) {
        auto at = crd->find(key);
        if (at == crd->end()) {
          (*crd)[key] = ordered_json::array();
        } else if (!at->is_array()) {
          *at = ordered_json::array({*at});
        }
        (*crd)[key].push_back(value);
      } else if (!q_.ignore_null || !value.is_null()) {
        (*crd)[key] = value;
      }
      return;
    }
    std::string k = key_of(r[depth_ - 1]);
    if (!crd->contains(k)) (*crd)[k] = ordered_json::object();
    if (listed(depth_)) remember(path, k);
    path += "/" + escape(k);
    crd = &(*crd)[k];
    for (int i = depth_; i < n_; ++i) {
      const std::string& name = fields_[i];
      if (listed(i + 1)) remember(path, name);
      if (q_.as_list && crd->contains(name)) {
        ordered_json& old = (*crd)[name];
        if (old.is_array()) {
          old.push_back(r[i]);
        } else {
          old = ordered_json::array({old, r[i]});
        }
      } else if (!q_.ignore_null || !r[i].is_null()) {
        (*crd)[name] = r[i];
      }
    }
  }

  // The with_lists keys become lists of their values, inner ones first.
  void listify(ordered_json& focus) {
    for (auto it = marks_.rbegin(); it != marks_.rend(); ++it) {
      ordered_json* d = resolve(focus, it->first);
      if (d == nullptr) continue;
      auto at = d->find(it->second);
      if (at == d->end()) continue;
      if (at->is_object()) {
        ordered_json values = ordered_json::array();
        for (auto& [k, v] : at->items()) values.push_back(v);
        *at = std::move(values);
      } else if (at->is_array()) {
        *at = ordered_json::array({*at});
      }
    }
  }

 private:
  static std::string key_of(const ordered_json& v) {
    return v.is_string() ? v.get<std::string>() : v.is_null() ? "None" : v.dump();
  }
  bool listed(int column) const {
    return std::find(q_.with_lists.begin(), q_.with_lists.end(), column) != q_.with_lists.end();
  }
  // A dict is remembered by its JSON pointer from `focus`: later rows may
  // move what a raw pointer would point at.
  void remember(const std::string& where, const std::string& key) {
    auto mark = std::make_pair(where, key);
    if (std::find(marks_.begin(), marks_.end(), mark) == marks_.end()) marks_.push_back(mark);
  }
  static std::string escape(const std::string& k) {
    std::string out;
    for (char c : k) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
    return out;
  }
  static ordered_json* resolve(ordered_json& focus, const std::string& where) {
    try {
      ordered_json& d = focus.at(ordered_json::json_pointer(where));
      return d.is_object() ? &d : nullptr;
    } catch (const std::exception&) {
      return nullptr;
    }
  }

  const query& q_;
  std::vector<std::string> fields_;
  int n_ = 0;
  int depth_ = 0;
  std::vector<std::pair<std::string, std::string>> marks_;
};

struct connection_closer {
  const pq::api* api;
  void operator()(PGconn* c) const { api->PQfinish(c); }
};
struct result_clearer {
  const pq::api* api;
  void operator()(PGresult* r) const { api->PQclear(r); }
};

}  // namespace
}  // namespace sql

pillar::options::ext_function postgres(nlohmann::json opts) {
  return [opts = std::move(opts)](const pillar::options::ext_call& call) -> ordered_json {
    using namespace sql;
    auto queries = extract_queries(call.config);
    const pq::api& api = pq::load("ext_pillar postgres");
    // Salt's _get_options: the master's `postgres:` mapping, with defaults.
    nlohmann::json conf = opts.contains("postgres") && opts["postgres"].is_object()
                              ? opts["postgres"]
                              : nlohmann::json::object();
    auto get = [&](const char* key, const char* fallback) {
      auto v = conf.find(key);
      if (v == conf.end() || v->is_null()) return std::string(fallback);
      return v->is_string() ? v->get<std::string>() : v->dump();
    };
    std::string host = get("host", "localhost"), user = get("user", "salt"),
                password = get("pass", "salt"), db = get("db", "salt"), port = get("port", "5432");
    const char* keys[] = {"host", "user", "password", "dbname", "port", "connect_timeout", nullptr};
    const char* values[] = {host.c_str(), user.c_str(), password.c_str(), db.c_str(), port.c_str(),
                            "30", nullptr};
    std::unique_ptr<PGconn, connection_closer> conn(api.PQconnectdbParams(keys, values, 0),
                                                    connection_closer{&api});
    if (!conn || api.PQstatus(conn.get()) != CONNECTION_OK) {
      throw base::error("cannot connect to PostgreSQL at " + host + ":" + port + " as " + user +
                        ", database " + db + ": " +
                        pq::clean_message(conn ? api.PQerrorMessage(conn.get()) : nullptr) +
                        " (set the master's postgres: host, port, user, pass, db)");
    }
    spdlog::debug("Querying POSTGRES for information for {}", call.id);
    ordered_json result = ordered_json::object();
    std::string id(call.id);
    for (const auto& q : queries) {
      int params = 0;
      std::string text = to_dollar_params(q.text, params);
      if (params != 1) {
        throw base::error("the query must hold %s once, for the minion id, and write a literal % "
                          "as %%: " + q.text);
      }
      const char* param_values[] = {id.c_str()};
      std::unique_ptr<PGresult, result_clearer> r(
          api.PQexecParams(conn.get(), text.c_str(), 1, nullptr, param_values, nullptr, nullptr, 0),
          result_clearer{&api});
      if (!r || api.PQresultStatus(r.get()) != PGRES_TUPLES_OK) {
        // Salt logs a database error and keeps what the earlier queries gave.
        spdlog::error("Error in ext_pillar POSTGRES: {}",
                      pq::clean_message(r ? api.PQresultErrorMessage(r.get())
                                          : api.PQerrorMessage(conn.get())));
        return result;
      }
      int nf = api.PQnfields(r.get());
      std::vector<std::string> fields;
      for (int i = 0; i < nf; ++i) fields.emplace_back(api.PQfname(r.get(), i));
      ordered_json* focus = &result;
      if (!q.root.empty()) focus = &(result[q.root] = ordered_json::object());
      shaper s(q, fields);
      for (int t = 0; t < api.PQntuples(r.get()); ++t) {
        row cells;
        for (int i = 0; i < nf; ++i) {
          cells.push_back(typed(api.PQgetvalue(r.get(), t, i), api.PQgetlength(r.get(), t, i),
                                api.PQftype(r.get(), i), api.PQgetisnull(r.get(), t, i) != 0));
        }
        s.add(*focus, cells);
      }
      s.listify(*focus);
    }
    return result;
  };
}

}  // namespace brine::ext_pillar
