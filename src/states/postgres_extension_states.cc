// Salt's postgres_extension states: postgres_extension.present (installed,
// moved to `schema`, upgraded to `ext_version`) and absent, through the
// postgres execution functions (create_metadata, create_extension,
// is_installed_extension, drop_extension).

#include <algorithm>
#include <string>

#include "states/postgres_states.h"
#include "states/python_text.h"
#include "states/registry.h"

namespace brine::states {
namespace postgres_extension_states {
namespace {

using plain_json = nlohmann::json;

bool has(const json& flags, const char* flag) {
  return flags.is_array() && std::find(flags.begin(), flags.end(), json(flag)) != flags.end();
}

asio::awaitable<json> present(state_call c) {
  const std::string name = c.name();
  json ret = make_ret(name, true, "Extension " + name + " is already present");
  const plain_json db = postgres::db_args(c);
  plain_json meta_kwargs = db;
  for (const char* key : {"schema", "ext_version"}) {
    if (const json* v = c.arg(key); v != nullptr && !v->is_null()) meta_kwargs[key] = py_text(*v);
  }
  std::string meta_fun = "postgres.create_metadata";
  plain_json args = plain_json::array({name});
  json meta = co_await c.run(std::move(meta_fun), std::move(args), std::move(meta_kwargs));
  std::string mode = "create";
  const bool install = has(meta, "EXTENSION NOT INSTALLED");
  if (install) mode = "install";
  bool upgrade = false;
  if (has(meta, "EXTENSION INSTALLED") &&
      (has(meta, "EXTENSION TO MOVE") || has(meta, "EXTENSION TO UPGRADE"))) {
    upgrade = true;
    mode = "upgrade";
  }
  if (!install && !upgrade) co_return ret;
  if (c.test) {
    ret["result"] = nullptr;
    // Salt: "set to be {mode}ed" with "eed" made "ed".
    ret["comment"] =
        "Extension " + name + " is set to be " + (mode == "upgrade" ? "upgraded" : mode + "ed");
    co_return ret;
  }
  plain_json kwargs = db;
  kwargs["name"] = name;
  for (const char* key : {"if_not_exists", "schema", "ext_version", "from_version"}) {
    if (const json* v = c.arg(key); v != nullptr && !v->is_null()) {
      kwargs[key] = plain_json::parse(v->dump());
    }
  }
  std::string create_fun = "postgres.create_extension";
  plain_json none = plain_json::array();
  json done = co_await c.run(std::move(create_fun), std::move(none), std::move(kwargs));
  if (done.is_boolean() && done.get<bool>()) {
    const std::string suffix = mode.back() == 'e' ? "d" : "ed";
    ret["comment"] = "The extension " + name + " has been " + mode + suffix;
    std::string capital = mode;
    capital[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(capital[0])));
    ret["changes"][name] = capital + suffix;
  } else {
    ret["comment"] = "Failed to " + mode + " extension " + name;
    ret["result"] = false;
  }
  co_return ret;
}

asio::awaitable<json> absent(state_call c) {
  const std::string name = c.name();
  json ret = make_ret(name, true, "");
  const plain_json db = postgres::db_args(c);
  std::string exists_fun = "postgres.is_installed_extension";
  plain_json args = plain_json::array({name});
  plain_json kwargs = db;
  json exists = co_await c.run(std::move(exists_fun), std::move(args), std::move(kwargs));
  if (!(exists.is_boolean() && exists.get<bool>())) {
    ret["comment"] = "Extension " + name + " is not present, so it cannot be removed";
    co_return ret;
  }
  if (c.test) {
    ret["result"] = nullptr;
    ret["comment"] = "Extension " + name + " is set to be removed";
    co_return ret;
  }
  plain_json drop_kwargs = db;
  for (const char* key : {"if_exists", "restrict", "cascade"}) {
    if (const json* v = c.arg(key); v != nullptr && !v->is_null()) {
      drop_kwargs[key] = plain_json::parse(v->dump());
    }
  }
  std::string drop_fun = "postgres.drop_extension";
  plain_json drop_args = plain_json::array({name});
  json dropped = co_await c.run(std::move(drop_fun), std::move(drop_args), std::move(drop_kwargs));
  if (dropped.is_boolean() && dropped.get<bool>()) {
    ret["comment"] = "Extension " + name + " has been removed";
    ret["changes"][name] = "Absent";
  } else {
    ret["result"] = false;
    ret["comment"] = "Extension " + name + " failed to be removed";
  }
  co_return ret;
}

}  // namespace
}  // namespace postgres_extension_states

void register_postgres_extension_states(registry& reg) {
  using namespace postgres_extension_states;
  reg.add("postgres_extension.present", postgres::guarded<present>, {"name"},
          "postgres_extension.present NAME [if_not_exists] [schema] [ext_version] "
          "[from_version] [user] [maintenance_db] [db_user] [db_password] [db_host] [db_port]: "
          "the extension is installed (in SCHEMA, at least at EXT_VERSION).");
  reg.add("postgres_extension.absent", postgres::guarded<absent>, {"name"},
          "postgres_extension.absent NAME [if_exists] [restrict] [cascade] [user] "
          "[maintenance_db] [db_user] [db_password] [db_host] [db_port]: the extension is not "
          "installed.");
}

}  // namespace brine::states
