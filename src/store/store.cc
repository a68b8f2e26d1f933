#include "store/store.h"

#include <algorithm>
#include <set>
#include <string_view>

#include "base/error.h"

namespace brine::store {

// The spellings are stored in the database and shown by `brine key`, so they
// are part of the file format: never rename one.
const char* to_string(key_state s) {
  switch (s) {
    case key_state::pending:
      return "pending";
    case key_state::accepted:
      return "accepted";
    case key_state::rejected:
      return "rejected";
    case key_state::denied:
      return "denied";
  }
  return "unknown";
}

std::optional<key_state> parse_key_state(const std::string& s) {
  if (s == "pending") return key_state::pending;
  if (s == "accepted") return key_state::accepted;
  if (s == "rejected") return key_state::rejected;
  if (s == "denied") return key_state::denied;
  return std::nullopt;
}

std::vector<return_record> store::get_returns(const std::string& jid,
                                              const std::vector<std::string>& minions) {
  std::set<std::string_view> wanted(minions.begin(), minions.end());
  std::vector<return_record> out;
  for (auto& r : get_returns(jid)) {
    if (wanted.contains(r.minion)) out.push_back(std::move(r));
  }
  std::sort(out.begin(), out.end(),
            [](const return_record& a, const return_record& b) { return a.minion < b.minion; });
  return out;
}

std::unique_ptr<store> open(const options& o) {
  if (o.url.empty() || o.url == "sqlite") {
    if (o.sqlite_path.empty()) throw base::error("store: sqlite needs a file path");
    return open_sqlite(o.sqlite_path);
  }
  if (o.url.rfind("postgresql://", 0) == 0 || o.url.rfind("postgres://", 0) == 0) {
    return open_postgres(o);
  }
  // Only the scheme is shown: the rest of a mistyped URL may hold a password.
  std::string scheme = o.url.substr(0, o.url.find(':'));
  throw base::error("store: '" + scheme +
                    "' is not a store; use sqlite (the default) or "
                    "postgresql://USER@HOST:PORT/DATABASE");
}

}  // namespace brine::store
