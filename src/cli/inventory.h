#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

// `brine inventory`'s pure parts: the fields a user asks for, how a value is
// found for one, and how rows are written (table, CSV). The command itself
// (inventory_command.cc) reads the store and matches the target.
namespace brine::cli::inventory {

// A mistake on the command line (a bad field, a bad target, a pillar key
// that may not be shown): exit status 3, as `brine cmd` gives a bad target.
class usage_error : public base::error {
 public:
  using base::error::error;
};

enum class source { builtin, grain, pillar };

struct field {
  std::string name;  // as the user gave it: the column's header
  source from = source::grain;
  // grain and pillar: the path of keys (a number also indexes a list);
  // builtin: the canonical name ("last_run.status").
  std::vector<std::string> path;
};

// What `brine inventory` prints when no --fields is given.
inline constexpr std::string_view k_default_fields =
    "id,os,osrelease,master,last_seen,last_run.status,last_run.started";

// The built-in fields, in the order --help lists them.
const std::vector<std::string>& builtin_names();

// One field: a built-in name (id, key, key.fingerprint, master, connected,
// last_seen, last_run.status|started|jid|function|test), `pillar.PATH`,
// `grains.PATH`, or a grain PATH. A PATH's keys are separated by '.' or ':'
// (Salt's delimiter). Throws usage_error naming the field and the fix.
field parse_field(std::string_view text);
// A comma-separated list of fields (empty items are an error).
std::vector<field> parse_fields(std::string_view list);

// The value at `path` in `tree`: an object's entry by key, a list's element
// by a decimal index; null when there is none.
nlohmann::json lookup(const nlohmann::json& tree, const std::vector<std::string>& path);

// Whether `brine inventory` may print the pillar at `path`: its dotted form
// matches one of the inventory_pillar_keys globs (fnmatch).
bool pillar_allowed(const std::vector<std::string>& path, const std::vector<std::string>& globs);

// A value as one table or CSV cell: a string as it is, null as nothing,
// anything else as compact JSON.
std::string cell_text(const nlohmann::json& value);

// One CSV record (RFC 4180): a cell holding a comma, a double quote, CR or LF,
// or leading or trailing space, is quoted, its quotes doubled; CRLF ends it.
// A cell that a spreadsheet would take for a formula (it starts with =, +,
// -, @, a tab or CR and is not a number) is given a leading ' first.
std::string csv_row(const std::vector<std::string>& cells);

// Rows as columns padded to their widest cell, two spaces apart.
std::string table(const std::vector<std::vector<std::string>>& rows);

}  // namespace brine::cli::inventory
