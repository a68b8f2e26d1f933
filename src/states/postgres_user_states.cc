// Salt's postgres_user states: postgres_user.present and absent, through
// the postgres execution functions (role_get, psql_query, user_create,
// user_update, user_exists, user_remove). Passwords are compared as Salt
// does (the verifier pg_authid holds against the given password hashed the
// same way) and appear in no comment and no change: a changed password is
// {"password": true}.

#include <string>
#include <vector>

#include "modules/postgres.h"
#include "states/postgres_states.h"
#include "states/python_text.h"
#include "states/registry.h"

namespace brine::states {
namespace postgres_user_states {
namespace {

using plain_json = nlohmann::json;

asio::awaitable<json> present(state_call c) {
  const std::string name = c.name();
  json ret = make_ret(name, true, "User " + name + " is already present");
  const plain_json db = postgres::db_args(c);
  const json* enc = c.arg("encrypted");
  const json encrypted =
      enc == nullptr || enc->is_null() ? json(modules::postgres::k_default_encryption) : *enc;
  const bool refresh = c.flag("refresh_password");

  plain_json get_kwargs = db;
  get_kwargs["return_password"] = !refresh;
  std::string role_get = "postgres.role_get";
  plain_json get_args = plain_json::array({name});
  json attr = co_await c.run(std::move(role_get), std::move(get_args), std::move(get_kwargs));
  const std::string mode = attr.is_null() ? "create" : "update";

  const json* pw = c.arg("password");
  if (pw != nullptr && pw->is_null()) pw = nullptr;
  if (mode == "create" && pw == nullptr) {
    pw = c.arg("default_password");
    if (pw != nullptr && pw->is_null()) pw = nullptr;
  }
  json password = nullptr;
  if (pw != nullptr) {
    const std::string given = py_text(*pw);
    const std::string stored =
        attr.is_object() && attr.contains("password") && attr["password"].is_string()
            ? attr["password"].get<std::string>()
            : "";
    if (!(mode == "update" && !refresh &&
          modules::postgres::verify_password(name, given, stored, encrypted))) {
      password = modules::postgres::maybe_encrypt_password(name, given, encrypted);
    }
  }

  json update = json::object();
  if (mode == "update") {
    auto differs = [&](const char* arg, const char* attribute) {
      const json* v = c.arg(arg);
      if (v != nullptr && !v->is_null() && attr.value(attribute, json()) != *v) update[arg] = *v;
    };
    differs("createdb", "can create databases");
    differs("inherit", "inherits privileges");
    differs("login", "can login");
    differs("createroles", "can create roles");
    differs("replication", "replication");
    differs("superuser", "superuser");
    if (!password.is_null()) update["password"] = true;
    if (const json* until = c.arg("valid_until"); until != nullptr && !until->is_null()) {
      std::string text = py_text(*until);
      std::string quoted;
      for (char ch : text) quoted += ch == '\'' ? std::string("''") : std::string(1, ch);
      std::string fun = "postgres.psql_query";
      plain_json args = plain_json::array({"SELECT '" + quoted + "'::timestamp(0) as dt;"});
      plain_json kwargs = db;
      json rows = co_await c.run(std::move(fun), std::move(args), std::move(kwargs));
      json dt = rows.is_array() && !rows.empty() ? rows[0].value("dt", json()) : json();
      // Salt's strptime("%Y-%m-%d %H:%M:%S"), None when it does not parse.
      const bool parses = dt.is_string() && dt.get<std::string>().size() == 19 &&
                          dt.get<std::string>()[4] == '-' && dt.get<std::string>()[10] == ' ';
      if (!parses) dt = nullptr;
      if (dt != attr.value("expiry time", json())) update["valid_until"] = *until;
    }
    if (const json* groups = c.arg("groups"); groups != nullptr && !groups->is_null()) {
      std::vector<std::string> wanted;
      if (groups->is_string()) {
        std::string text = groups->get<std::string>();
        std::size_t start = 0;
        for (;;) {
          std::size_t comma = text.find(',', start);
          wanted.push_back(text.substr(start, comma - start));
          if (comma == std::string::npos) break;
          start = comma + 1;
        }
      } else if (groups->is_array()) {
        for (const auto& g : *groups) wanted.push_back(py_text(g));
      }
      const json have = attr.value("groups", json::array());
      json missing = json::array();
      for (const auto& g : wanted) {
        if (std::find(have.begin(), have.end(), json(g)) == have.end()) missing.push_back(g);
      }
      if (!missing.empty()) update["groups"] = missing;
    }
  }

  if (mode == "create" || !update.empty()) {
    if (c.test) {
      if (!update.empty()) ret["changes"][name] = update;
      ret["result"] = nullptr;
      ret["comment"] = "User " + name + " is set to be " + mode + "d";
      co_return ret;
    }
    plain_json kwargs = db;
    kwargs["username"] = name;
    for (const char* key : {"createdb", "createroles", "superuser", "login", "inherit",
                            "replication", "valid_until", "groups"}) {
      if (const json* v = c.arg(key); v != nullptr && !v->is_null()) {
        kwargs[key] = plain_json::parse(v->dump());
      }
    }
    kwargs["encrypted"] = plain_json(encrypted);
    if (!password.is_null()) kwargs["rolepassword"] = password.get<std::string>();
    std::string fun = "postgres.user_" + mode;
    plain_json none = plain_json::array();
    json done = co_await c.run(std::move(fun), std::move(none), std::move(kwargs));
    if (done.is_boolean() && done.get<bool>()) {
      ret["comment"] = "The user " + name + " has been " + mode + "d";
      ret["changes"][name] = update.empty() ? json("Present") : update;
    } else {
      ret["comment"] = "Failed to " + mode + " user " + name;
      ret["result"] = false;
    }
  }
  co_return ret;
}

asio::awaitable<json> absent(state_call c) {
  const std::string name = c.name();
  json ret = make_ret(name, true, "");
  const plain_json db = postgres::db_args(c);
  std::string exists_fun = "postgres.user_exists";
  plain_json args = plain_json::array({name});
  plain_json kwargs = db;
  json exists = co_await c.run(std::move(exists_fun), std::move(args), std::move(kwargs));
  if (!(exists.is_boolean() && exists.get<bool>())) {
    ret["comment"] = "User " + name + " is not present, so it cannot be removed";
    co_return ret;
  }
  if (c.test) {
    ret["result"] = nullptr;
    ret["comment"] = "User " + name + " is set to be removed";
    co_return ret;
  }
  std::string remove_fun = "postgres.user_remove";
  plain_json remove_args = plain_json::array({name});
  plain_json remove_kwargs = db;
  json removed =
      co_await c.run(std::move(remove_fun), std::move(remove_args), std::move(remove_kwargs));
  if (removed.is_boolean() && removed.get<bool>()) {
    ret["comment"] = "User " + name + " has been removed";
    ret["changes"][name] = "Absent";
  } else {
    ret["result"] = false;
    ret["comment"] = "User " + name + " failed to be removed";
  }
  co_return ret;
}

}  // namespace
}  // namespace postgres_user_states

void register_postgres_user_states(registry& reg) {
  using namespace postgres_user_states;
  reg.add("postgres_user.present", postgres::guarded<present>, {"name"},
          "postgres_user.present NAME [createdb] [createroles] [encrypted=md5] [superuser] "
          "[replication] [inherit] [login] [password] [default_password] [refresh_password] "
          "[valid_until] [groups] [user] [maintenance_db] [db_user] [db_password] [db_host] "
          "[db_port]: the role exists with these attributes.");
  reg.add("postgres_user.absent", postgres::guarded<absent>, {"name"},
          "postgres_user.absent NAME [user] [maintenance_db] [db_user] [db_password] [db_host] "
          "[db_port]: the role does not exist.");
}

}  // namespace brine::states
