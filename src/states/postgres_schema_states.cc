// Salt's postgres_schema states: postgres_schema.present and absent in the
// database `dbname`, through the postgres execution functions (schema_get,
// schema_create, schema_exists, schema_remove). As Salt's, the return
// carries `dbname` beside name.

#include <string>

#include "states/postgres_states.h"
#include "states/python_text.h"
#include "states/registry.h"

namespace brine::states {
namespace postgres_schema_states {
namespace {

using plain_json = nlohmann::json;

// Salt's db_args of the schema states: the functions take the state's
// names as they are.
plain_json schema_args(const state_call& c) {
  plain_json out = plain_json::object();
  for (const char* key : {"db_user", "db_password", "db_host", "db_port", "user"}) {
    if (const json* v = c.arg(key); v != nullptr && !v->is_null()) {
      out[key] = plain_json::parse(v->dump());
    }
  }
  return out;
}

std::string dbname_of(const state_call& c) {
  const json* v = c.arg("dbname");
  return v == nullptr || v->is_null() ? "" : py_text(*v);
}

asio::awaitable<json> present(state_call c) {
  const std::string name = c.name();
  const std::string dbname = dbname_of(c);
  json ret = json::object();
  ret["dbname"] = dbname;
  ret["name"] = name;
  ret["changes"] = json::object();
  ret["result"] = true;
  ret["comment"] = "Schema " + name + " is already present in database " + dbname;
  std::string get_fun = "postgres.schema_get";
  plain_json args = plain_json::array({dbname, name});
  json attr = co_await c.run(std::move(get_fun), std::move(args), schema_args(c));
  if (!attr.is_null()) {
    ret["comment"] = "Schema " + name + " already exists in database " + dbname;
    co_return ret;
  }
  if (c.test) {
    ret["result"] = nullptr;
    ret["comment"] = "Schema " + name + " is set to be created in database " + dbname + ".";
    co_return ret;
  }
  plain_json kwargs = schema_args(c);
  if (const json* owner = c.arg("owner"); owner != nullptr && !owner->is_null()) {
    kwargs["owner"] = py_text(*owner);
  }
  std::string create_fun = "postgres.schema_create";
  plain_json create_args = plain_json::array({dbname, name});
  json created = co_await c.run(std::move(create_fun), std::move(create_args), std::move(kwargs));
  if (created.is_boolean() && created.get<bool>()) {
    ret["comment"] = "Schema " + name + " has been created in database " + dbname;
    ret["changes"][name] = "Present";
  } else {
    ret["comment"] = "Failed to create schema " + name + " in database " + dbname;
    ret["result"] = false;
  }
  co_return ret;
}

asio::awaitable<json> absent(state_call c) {
  const std::string name = c.name();
  const std::string dbname = dbname_of(c);
  json ret = json::object();
  ret["name"] = name;
  ret["dbname"] = dbname;
  ret["changes"] = json::object();
  ret["result"] = true;
  ret["comment"] = "";
  std::string exists_fun = "postgres.schema_exists";
  plain_json args = plain_json::array({dbname, name});
  json exists = co_await c.run(std::move(exists_fun), std::move(args), schema_args(c));
  if (!(exists.is_boolean() && exists.get<bool>())) {
    ret["comment"] =
        "Schema " + name + " is not present in database " + dbname + ", so it cannot be removed";
    co_return ret;
  }
  if (c.test) {
    ret["result"] = nullptr;
    ret["comment"] = "Schema " + name + " is set to be removed from database " + dbname;
    co_return ret;
  }
  std::string remove_fun = "postgres.schema_remove";
  plain_json remove_args = plain_json::array({dbname, name});
  json removed = co_await c.run(std::move(remove_fun), std::move(remove_args), schema_args(c));
  if (removed.is_boolean() && removed.get<bool>()) {
    ret["comment"] = "Schema " + name + " has been removed from database " + dbname;
    ret["changes"][name] = "Absent";
  } else {
    ret["result"] = false;
    ret["comment"] = "Schema " + name + " failed to be removed";
  }
  co_return ret;
}

}  // namespace
}  // namespace postgres_schema_states

void register_postgres_schema_states(registry& reg) {
  using namespace postgres_schema_states;
  reg.add("postgres_schema.present", postgres::guarded<present>, {"dbname", "name"},
          "postgres_schema.present DBNAME NAME [owner] [user] [db_user] [db_password] [db_host] "
          "[db_port]: the schema exists in database DBNAME.");
  reg.add("postgres_schema.absent", postgres::guarded<absent>, {"dbname", "name"},
          "postgres_schema.absent DBNAME NAME [user] [db_user] [db_password] [db_host] "
          "[db_port]: the schema does not exist in database DBNAME.");
}

}  // namespace brine::states
