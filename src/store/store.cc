#include "store/store.h"

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

}  // namespace brine::store
