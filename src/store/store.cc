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

glob_parts split_glob(const std::string& glob) {
  glob_parts g;
  for (size_t i = 0; i < glob.size(); ++i) {
    char c = glob[i];
    if (c == '*' || c == '?' || c == '[') {
      g.wildcard = true;
      return g;
    }
    if (c == '\\' && i + 1 < glob.size()) c = glob[++i];
    g.prefix += c;
  }
  return g;
}

std::string prefix_end(std::string prefix) {
  while (!prefix.empty()) {
    auto last = static_cast<unsigned char>(prefix.back());
    if (last < 0xff) {
      prefix.back() = static_cast<char>(last + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return prefix;
}

namespace {

// Where the bracket expression opening at glob[open] ends (its `]`), as
// fnmatch reads it: a `]` right after `[` or `[!` is a member. npos: no end,
// so the `[` is itself.
size_t bracket_end(const std::string& glob, size_t open) {
  size_t i = open + 1;
  if (i < glob.size() && (glob[i] == '!' || glob[i] == '^')) ++i;
  if (i < glob.size() && glob[i] == ']') ++i;
  auto end = glob.find(']', i);
  return end;
}

}  // namespace

std::string sqlite_glob(const std::string& glob) {
  std::string out;
  for (size_t i = 0; i < glob.size(); ++i) {
    char c = glob[i];
    if (c == '\\' && i + 1 < glob.size()) {
      c = glob[++i];
      if (c == '*' || c == '?' || c == '[') {
        out += std::string("[") + c + "]";
      } else {
        out += c;
      }
    } else if (c == '[') {
      size_t end = bracket_end(glob, i);
      if (end == std::string::npos) {
        out += "[[]";
        continue;
      }
      size_t body = i + 1;
      out += '[';
      if (glob[body] == '!' || glob[body] == '^') {
        out += '^';
        ++body;
      }
      out.append(glob, body, end - body);
      out += ']';
      i = end;
    } else {
      out += c;
    }
  }
  return out;
}

std::string posix_regex(const std::string& glob) {
  auto literal = [](std::string& out, char c) {
    if (std::string_view(".^$|()[]{}*+?\\").find(c) != std::string_view::npos) out += '\\';
    out += c;
  };
  std::string out = "^";
  for (size_t i = 0; i < glob.size(); ++i) {
    char c = glob[i];
    if (c == '\\' && i + 1 < glob.size()) {
      literal(out, glob[++i]);
    } else if (c == '*') {
      out += ".*";
    } else if (c == '?') {
      out += '.';
    } else if (c == '[') {
      size_t end = bracket_end(glob, i);
      if (end == std::string::npos) {
        literal(out, c);
        continue;
      }
      size_t body = i + 1;
      out += '[';
      if (glob[body] == '!' || glob[body] == '^') {
        out += '^';
        ++body;
      }
      for (size_t k = body; k < end; ++k) {
        // A backslash inside brackets is an escape to PostgreSQL.
        if (glob[k] == '\\') out += '\\';
        out += glob[k];
      }
      out += ']';
      i = end;
    } else {
      literal(out, c);
    }
  }
  return out + "$";
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

void store::announce_acks(const std::map<std::string, std::vector<std::string>>&) {}

std::vector<minion_data_record> store::load_minion_data(const std::vector<std::string>& ids) {
  std::set<std::string_view> wanted(ids.begin(), ids.end());
  std::vector<minion_data_record> out;
  for (auto& r : load_minion_data()) {
    if (wanted.contains(r.id)) out.push_back(std::move(r));
  }
  return out;
}

std::vector<minion_data_record> store::query_minion_data(const minion_data_query& q) {
  auto rows = load_minion_data();
  for (auto& r : rows) {
    if (!q.pillar) r.pillar.reset();
    if (!q.grains || !r.grains) continue;
    nlohmann::json cut = nlohmann::json::object();
    if (r.grains->is_object()) {
      for (const auto& k : *q.grains) {
        auto it = r.grains->find(k);
        if (it != r.grains->end() && !it->is_null()) cut[k] = std::move(*it);
      }
    }
    r.grains = std::move(cut);
  }
  return rows;
}

std::vector<member_record> store::heartbeat(const member_record& me) { return {me}; }

std::vector<member_record> store::members() { return {}; }

bool store::remove_member(const std::string& name) {
  throw base::error("store " + this->name() + ": cannot remove master " + name +
                    ": only a shared (PostgreSQL) store has cluster members");
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
