// Salt's postgres_database states: postgres_database.present and absent,
// through the postgres execution functions (db_list, db_create, db_alter,
// db_exists, db_remove).

#include <algorithm>
#include <cctype>
#include <string>

#include "states/postgres_states.h"
#include "states/python_text.h"
#include "states/registry.h"

namespace brine::states {
namespace postgres_database_states {
namespace {

using plain_json = nlohmann::json;

std::string lower(std::string s) {
  for (auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

// An argument as Salt tests it: given and true (not None, not '').
std::string given_text(const state_call& c, const char* key) {
  const json* v = c.arg(key);
  if (v == nullptr || v->is_null() || (v->is_string() && v->get<std::string>().empty())) {
    return "";
  }
  return py_text(*v);
}

asio::awaitable<json> present(state_call c) {
  const std::string name = c.name();
  json ret = make_ret(name, true, "Database " + name + " is already present");
  const plain_json db = postgres::db_args(c);
  std::string list_fun = "postgres.db_list";
  plain_json list_kwargs = db;
  plain_json none = plain_json::array();
  json dbs = co_await c.run(std::move(list_fun), std::move(none), std::move(list_kwargs));
  const bool exists = dbs.is_object() && dbs.contains(name);
  const json params = exists ? dbs[name] : json::object();
  auto param = [&](const char* key) { return params.value(key, std::string()); };
  const std::string tablespace = given_text(c, "tablespace");
  const std::string encoding = given_text(c, "encoding");
  const std::string lc_collate = given_text(c, "lc_collate");
  const std::string lc_ctype = given_text(c, "lc_ctype");
  const std::string owner = given_text(c, "owner");
  if (exists && (tablespace.empty() || param("Tablespace") == tablespace) &&
      (encoding.empty() || lower(param("Encoding")) == lower(encoding)) &&
      (lc_collate.empty() || param("Collate") == lc_collate) &&
      (lc_ctype.empty() || param("Ctype") == lc_ctype) &&
      (owner.empty() || param("Owner") == owner)) {
    co_return ret;
  }
  if (exists && ((!encoding.empty() && lower(param("Encoding")) != lower(encoding)) ||
                 (!lc_collate.empty() && param("Collate") != lc_collate) ||
                 (!lc_ctype.empty() && param("Ctype") != lc_ctype))) {
    ret["comment"] = "Database " + name + " has wrong parameters which couldn't be changed on fly.";
    ret["result"] = false;
    co_return ret;
  }
  if (c.test) {
    ret["result"] = nullptr;
    ret["comment"] = exists ? "Database " + name + " exists, but parameters need to be changed"
                            : "Database " + name + " is set to be created";
    co_return ret;
  }
  plain_json kwargs = db;
  auto pass = [&](const char* key) {
    if (const json* v = c.arg(key); v != nullptr && !v->is_null()) {
      kwargs[key] = plain_json::parse(v->dump());
    }
  };
  bool done = false;
  if (!exists) {
    for (const char* key :
         {"tablespace", "encoding", "lc_collate", "lc_ctype", "owner", "template"}) {
      pass(key);
    }
    std::string fun = "postgres.db_create";
    plain_json args = plain_json::array({name});
    json r = co_await c.run(std::move(fun), std::move(args), std::move(kwargs));
    done = r.is_boolean() && r.get<bool>();
    ret["comment"] =
        done ? "The database " + name + " has been created" : "Failed to create database " + name;
    if (done) ret["changes"][name] = "Present";
  } else {
    for (const char* key : {"tablespace", "owner", "owner_recurse"}) pass(key);
    std::string fun = "postgres.db_alter";
    plain_json args = plain_json::array({name});
    json r = co_await c.run(std::move(fun), std::move(args), std::move(kwargs));
    done = r.is_boolean() && r.get<bool>();
    ret["comment"] = done ? "Parameters for database " + name + " have been changed"
                          : "Failed to change parameters for database " + name;
    if (done) ret["changes"][name] = "Parameters changed";
  }
  if (!done) ret["result"] = false;
  co_return ret;
}

asio::awaitable<json> absent(state_call c) {
  const std::string name = c.name();
  json ret = make_ret(name, true, "");
  const plain_json db = postgres::db_args(c);
  std::string exists_fun = "postgres.db_exists";
  plain_json args = plain_json::array({name});
  plain_json kwargs = db;
  json exists = co_await c.run(std::move(exists_fun), std::move(args), std::move(kwargs));
  if (exists.is_boolean() && exists.get<bool>()) {
    if (c.test) {
      ret["result"] = nullptr;
      ret["comment"] = "Database " + name + " is set to be removed";
      co_return ret;
    }
    std::string remove_fun = "postgres.db_remove";
    plain_json remove_args = plain_json::array({name});
    plain_json remove_kwargs = db;
    json removed =
        co_await c.run(std::move(remove_fun), std::move(remove_args), std::move(remove_kwargs));
    if (removed.is_boolean() && removed.get<bool>()) {
      ret["comment"] = "Database " + name + " has been removed";
      ret["changes"][name] = "Absent";
      co_return ret;
    }
  }
  ret["comment"] = "Database " + name + " is not present, so it cannot be removed";
  co_return ret;
}

}  // namespace
}  // namespace postgres_database_states

void register_postgres_database_states(registry& reg) {
  using namespace postgres_database_states;
  reg.add("postgres_database.present", postgres::guarded<present>, {"name"},
          "postgres_database.present NAME [tablespace] [encoding] [lc_collate] [lc_ctype] "
          "[owner] [owner_recurse=False] [template] [user] [maintenance_db] [db_user] "
          "[db_password] [db_host] [db_port]: the database exists with these properties.");
  reg.add("postgres_database.absent", postgres::guarded<absent>, {"name"},
          "postgres_database.absent NAME [user] [maintenance_db] [db_user] [db_password] "
          "[db_host] [db_port]: the database does not exist.");
}

}  // namespace brine::states
