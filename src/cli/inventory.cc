#include "cli/inventory.h"

#include <fnmatch.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <optional>

namespace brine::cli::inventory {

using nlohmann::json;

namespace {

// Prefixes that name built-ins: anything after them must be one.
constexpr std::string_view k_reserved[] = {"last_run", "key"};

std::string builtin_list() {
  std::string out;
  for (const auto& n : builtin_names()) out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::vector<std::string> split_path(std::string_view field_text, std::string_view path) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i <= path.size(); ++i) {
    if (i < path.size() && path[i] != '.' && path[i] != ':') continue;
    if (i == start) {
      throw usage_error("field '" + std::string(field_text) +
                        "' has an empty key; separate keys with one '.' or ':' "
                        "(e.g. ip4_interfaces.eth0)");
    }
    out.emplace_back(path.substr(start, i - start));
    start = i + 1;
  }
  return out;
}

// A cell a spreadsheet would run as a formula (=, +, -, @, a tab or CR
// first: OWASP's CSV injection) gets a leading ', which spreadsheets show
// as text. Grains come from minions, so a minion could put a formula in
// the administrator's spreadsheet. A number ("-5", "+1.5e3") stays as it
// is.
std::string spreadsheet_safe(const std::string& c) {
  if (c.empty() || std::string_view("=+-@\t\r").find(c.front()) == std::string_view::npos) {
    return c;
  }
  double number = 0;
  const char* first = c.data() + (c.front() == '+' ? 1 : 0);
  auto [end, ec] = std::from_chars(first, c.data() + c.size(), number);
  if (ec == std::errc() && end == c.data() + c.size() && first != end) return c;
  return "'" + c;
}

}  // namespace

const std::vector<std::string>& builtin_names() {
  static const std::vector<std::string> names = {"id",
                                                 "key",
                                                 "key.fingerprint",
                                                 "master",
                                                 "connected",
                                                 "last_seen",
                                                 "last_run.status",
                                                 "last_run.started",
                                                 "last_run.jid",
                                                 "last_run.function",
                                                 "last_run.test"};
  return names;
}

field parse_field(std::string_view text) {
  std::string t(text);
  if (t.empty()) {
    throw usage_error(
        "--fields has an empty field; give names separated by single commas, "
        "e.g. --fields id,os,last_run.status");
  }
  if (std::any_of(t.begin(), t.end(),
                  [](unsigned char c) { return std::isspace(c) != 0 || std::iscntrl(c) != 0; })) {
    throw usage_error("field '" + t +
                      "' holds a space or control character; field names are "
                      "grain paths (os, ip4_interfaces.eth0), pillar.KEY or one of: " +
                      builtin_list());
  }
  const auto& names = builtin_names();
  if (std::find(names.begin(), names.end(), t) != names.end()) {
    return {t, source::builtin, {t}};
  }
  for (std::string_view reserved : k_reserved) {
    if (t.starts_with(reserved) && t.size() > reserved.size() &&
        (t[reserved.size()] == '.' || t[reserved.size()] == ':')) {
      throw usage_error("unknown field '" + t + "'; the built-in fields are: " + builtin_list() +
                        " (a grain of that name: grains." + t + ")");
    }
  }
  auto sub = [&](std::string_view prefix, source from) -> std::optional<field> {
    if (t == prefix) {
      throw usage_error("field '" + t + "' needs a key: " + std::string(prefix) + ".KEY (e.g. " +
                        std::string(prefix) + (from == source::pillar ? ".role" : ".os") + ")");
    }
    if (t.size() > prefix.size() && t.starts_with(prefix) &&
        (t[prefix.size()] == '.' || t[prefix.size()] == ':')) {
      return field{t, from, split_path(t, std::string_view(t).substr(prefix.size() + 1))};
    }
    return std::nullopt;
  };
  if (auto f = sub("pillar", source::pillar)) return *f;
  if (auto f = sub("grains", source::grain)) return *f;
  return {t, source::grain, split_path(t, t)};
}

std::vector<field> parse_fields(std::string_view list) {
  std::vector<field> out;
  size_t start = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    if (i < list.size() && list[i] != ',') continue;
    out.push_back(parse_field(list.substr(start, i - start)));
    start = i + 1;
  }
  return out;
}

json lookup(const json& tree, const std::vector<std::string>& path) {
  const json* at = &tree;
  for (const auto& key : path) {
    if (at->is_object()) {
      auto it = at->find(key);
      if (it == at->end()) return nullptr;
      at = &*it;
    } else if (at->is_array()) {
      size_t index = 0;
      auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), index);
      if (ec != std::errc() || end != key.data() + key.size() || index >= at->size()) {
        return nullptr;
      }
      at = &(*at)[index];
    } else {
      return nullptr;
    }
  }
  return *at;
}

bool pillar_allowed(const std::vector<std::string>& path, const std::vector<std::string>& globs) {
  std::string dotted;
  for (const auto& k : path) dotted += (dotted.empty() ? "" : ".") + k;
  return std::any_of(globs.begin(), globs.end(), [&](const std::string& g) {
    return ::fnmatch(g.c_str(), dotted.c_str(), 0) == 0;
  });
}

std::string cell_text(const json& value) {
  if (value.is_null()) return "";
  if (value.is_string()) return value.get<std::string>();
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string csv_row(const std::vector<std::string>& cells) {
  std::string out;
  for (size_t i = 0; i < cells.size(); ++i) {
    if (i > 0) out += ',';
    std::string c = spreadsheet_safe(cells[i]);
    bool quote = c.find_first_of(",\"\r\n") != std::string::npos ||
                 (!c.empty() && (c.front() == ' ' || c.back() == ' '));
    if (!quote) {
      out += c;
      continue;
    }
    out += '"';
    for (char ch : c) {
      if (ch == '"') out += '"';
      out += ch;
    }
    out += '"';
  }
  out += "\r\n";
  return out;
}

std::string table(const std::vector<std::vector<std::string>>& rows) {
  if (rows.empty()) return "";
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size() && i < width.size(); ++i) {
      width[i] = std::max(width[i], row[i].size());
    }
  }
  size_t line_width = 1;
  for (size_t w : width) line_width += w + 2;
  std::string out;
  out.reserve(line_width * rows.size());
  for (const auto& row : rows) {
    size_t start = out.size();
    for (size_t i = 0; i < row.size(); ++i) {
      out += row[i];
      if (i + 1 < row.size()) out.append(width[i] - row[i].size() + 2, ' ');
    }
    size_t end = out.size();
    while (end > start && out[end - 1] == ' ') --end;
    out.resize(end);
    out += '\n';
  }
  return out;
}

}  // namespace brine::cli::inventory
