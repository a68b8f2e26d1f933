#pragma once

#include <asio/awaitable.hpp>
#include <string>
#include <utility>

#include "base/error.h"
#include "states/registry.h"

// What the four postgres state modules (postgres_user, postgres_database,
// postgres_schema, postgres_extension) share: Salt's db_args, and one way
// to fail.
namespace brine::states::postgres {

// Salt's db_args: the state's connection arguments under the execution
// functions' names (db_host -> host, user -> runas, ...); those not given
// are left out (Salt passes None, which the functions take as not given).
inline nlohmann::json db_args(const state_call& c) {
  static const std::pair<const char*, const char*> k_names[] = {
      {"maintenance_db", "maintenance_db"},
      {"user", "runas"},
      {"db_host", "host"},
      {"db_user", "user"},
      {"db_port", "port"},
      {"db_password", "password"}};
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [state_name, fun_name] : k_names) {
    if (const json* v = c.arg(state_name); v != nullptr && !v->is_null()) out[fun_name] = *v;
  }
  return out;
}

// `fn`'s answer, or Salt's failed return when an execution function failed
// (no connection, a server error): the message names the server and the
// fix. Salt, running psql, reports most of these only as "Failed to ...".
template <asio::awaitable<json> (*F)(state_call)>
asio::awaitable<json> guarded(state_call c) {
  const std::string name = c.name();
  try {
    co_return co_await F(std::move(c));
  } catch (const base::error& e) {
    co_return make_ret(name, false, e.what());
  }
}

}  // namespace brine::states::postgres
