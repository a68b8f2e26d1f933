#include <iostream>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/fs.h"
#include "cli/commands.h"

namespace brine::cli {

using nlohmann::json;

std::unique_ptr<store::store> open_store(const base::master_config& cfg, bool must_exist,
                                         bool migrate) {
  store::options o;
  o.url = cfg.store;
  o.sqlite_path = cfg.cachedir + "/jobs.db";
  o.password_file = cfg.store_password_file;
  o.origin = "cli";
  o.migrate = migrate;
  if (must_exist && (o.url.empty() || o.url == "sqlite") && !base::file_exists(o.sqlite_path)) {
    throw base::error("no job cache at " + o.sqlite_path + "; has a master run with " + cfg.source +
                      "?");
  }
  return store::open(o);
}

namespace {

json status_json(const store::status& s) {
  return {{"backend", s.backend},
          {"store", s.name},
          {"schema_version", s.schema_version},
          {"code_version", s.code_version},
          {"rows", s.rows}};
}

void print_status(const store::status& s) {
  std::cout << "store: " << s.backend << " " << s.name << "\n";
  std::cout << "reachable: yes\n";
  if (s.schema_version == 0) {
    std::cout << "schema version: none yet (this brine: " << s.code_version << ")\n";
  } else {
    std::cout << "schema version: " << s.schema_version << " (this brine: " << s.code_version
              << ")\n";
  }
  if (s.rows.empty()) return;
  std::cout << "rows:";
  const char* sep = " ";
  for (const auto& [table, n] : s.rows) {
    std::cout << sep << table << " " << n;
    sep = ", ";
  }
  std::cout << "\n";
}

}  // namespace

// Exit codes: 0 the store is reachable and its schema is this brine's; 3 its
// schema is behind (check); errors (unreachable, a wrong password, a newer
// schema) throw and exit 1 through main.
int store_command(const base::master_config& cfg, const store_options& o) {
  if (o.action == "migrate") {
    int before = open_store(cfg, false, false)->check().schema_version;
    auto db = open_store(cfg, false, true);
    auto s = db->check();
    if (o.json) {
      json out = status_json(s);
      out["migrated_from"] = before;
      std::cout << out.dump(2) << "\n";
    } else if (before == s.schema_version) {
      std::cout << "store " << db->name() << ": schema version " << s.schema_version
                << " is current; nothing to do\n";
    } else {
      std::cout << "store " << db->name() << ": migrated from schema version " << before << " to "
                << s.schema_version << "\n";
    }
    return 0;
  }
  auto db = open_store(cfg, true, false);
  auto s = db->check();
  if (o.json) {
    std::cout << status_json(s).dump(2) << "\n";
  } else {
    print_status(s);
    if (s.schema_version < s.code_version) {
      std::cout << "the schema is behind this brine; run `brine store migrate` (masters "
                   "migrate it when they start)\n";
    }
  }
  return s.schema_version < s.code_version ? 3 : 0;
}

}  // namespace brine::cli
