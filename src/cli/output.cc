#include "cli/output.h"

#include <yaml-cpp/yaml.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <ctime>

#include "base/error.h"
#include "base/python.h"
#include "base/yaml_json.h"

namespace brine::cli {
namespace {

void scalar(std::string& out, const nlohmann::json& v, const std::string& pad) {
  std::string text;
  if (v.is_boolean()) {
    text = v.get<bool>() ? "True" : "False";
  } else if (v.is_null()) {
    text = "None";
  } else if (v.is_string()) {
    // Python's splitlines: no line for an empty string, none after a
    // final newline.
    text = v.get<std::string>();
    if (text.empty()) return;
    if (text.back() == '\n') text.pop_back();
  } else {
    text = v.dump();
  }
  size_t start = 0;
  for (;;) {
    size_t nl = text.find('\n', start);
    out +=
        pad + text.substr(start, nl == std::string::npos ? std::string::npos : nl - start) + "\n";
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
}

void walk(std::string& out, const nlohmann::json& v, int indent) {
  std::string pad(static_cast<size_t>(indent), ' ');
  if (v.is_object()) {
    out += pad + "----------\n";
    for (const auto& [k, item] : v.items()) {
      out += pad + k + ":\n";
      walk(out, item, indent + 4);
    }
  } else if (v.is_array()) {
    for (const auto& item : v) {
      if (item.is_structured()) {
        out += pad + "|_\n";
        walk(out, item, indent + 2);
      } else {
        std::string line;
        scalar(line, item, "");
        out += pad + "- " + line;
      }
    }
  } else {
    scalar(out, v, pad);
  }
}

}  // namespace

namespace {

// Years 1..9999 by hand (below); anything else through gmtime_r.
constexpr int64_t k_year_1_ms = -62135596800000;
constexpr int64_t k_year_10000_ms = 253402300800000;

std::string utc_time_by_libc(int64_t unix_ms, time_unit shown) {
  int64_t ms = ((unix_ms % 1000) + 1000) % 1000;
  auto secs = static_cast<time_t>(unix_ms / 1000 - (unix_ms % 1000 < 0 ? 1 : 0));
  struct tm tm {};
  ::gmtime_r(&secs, &tm);
  char buf[64];
  int n = std::snprintf(buf, sizeof buf, "%04d-%02d-%02d %02d:%02d", tm.tm_year + 1900,
                        tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min);
  if (shown != time_unit::minutes) {
    n += std::snprintf(buf + n, sizeof buf - static_cast<size_t>(n), ":%02d", tm.tm_sec);
  }
  if (shown == time_unit::milliseconds) {
    std::snprintf(buf + n, sizeof buf - static_cast<size_t>(n), ".%03d", static_cast<int>(ms));
  }
  return buf;
}

}  // namespace

std::string utc_time(int64_t unix_ms, time_unit shown) {
  if (unix_ms < k_year_1_ms || unix_ms >= k_year_10000_ms) return utc_time_by_libc(unix_ms, shown);
  using namespace std::chrono;
  // Floor division: a time before 1970 keeps its milliseconds positive.
  const sys_time<milliseconds> t{milliseconds(unix_ms)};
  const auto day = floor<days>(t);
  const year_month_day date{day};
  const hh_mm_ss clock{floor<milliseconds>(t - day)};
  // Digits written by hand: `brine inventory` prints two times for each of
  // 10,000 minions, and gmtime_r + snprintf took a fifth of its time.
  char buf[32];
  char* p = buf;
  auto put = [&p](unsigned v, int digits) {
    for (int i = digits - 1; i >= 0; --i) {
      p[i] = static_cast<char>('0' + v % 10);
      v /= 10;
    }
    p += digits;
  };
  put(static_cast<unsigned>(static_cast<int>(date.year())), 4);
  *p++ = '-';
  put(static_cast<unsigned>(date.month()), 2);
  *p++ = '-';
  put(static_cast<unsigned>(date.day()), 2);
  *p++ = ' ';
  put(static_cast<unsigned>(clock.hours().count()), 2);
  *p++ = ':';
  put(static_cast<unsigned>(clock.minutes().count()), 2);
  if (shown != time_unit::minutes) {
    *p++ = ':';
    put(static_cast<unsigned>(clock.seconds().count()), 2);
  }
  if (shown == time_unit::milliseconds) {
    *p++ = '.';
    put(static_cast<unsigned>(clock.subseconds().count()), 3);
  }
  return std::string(buf, p);
}

std::string nested_at(const nlohmann::json& value, int indent) {
  std::string out;
  walk(out, value, indent);
  return out;
}

std::string nested(const std::string& id, const nlohmann::json& value) {
  std::string out = id + ":\n";
  walk(out, value, 4);
  return out;
}

namespace {

bool needs_quotes(const std::string& s) {
  if (s.empty()) return true;
  // A plain scalar that YAML would read as a number, boolean or null, or
  // that holds characters with a meaning in YAML.
  auto as_yaml = base::yaml_scalar(s);
  if (!as_yaml.is_string() || as_yaml.get<std::string>() != s) return true;
  static const std::string leading = "-?:,[]{}#&*!|>'\"%@` \t";
  if (leading.find(s.front()) != std::string::npos || s.back() == ' ') return true;
  return s.find(": ") != std::string::npos || s.find(" #") != std::string::npos ||
         s.back() == ':' || s.find('\n') != std::string::npos;
}

std::string quoted(const std::string& s) {
  if (s.find('\n') == std::string::npos) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
    return out + "'";
  }
  return nlohmann::json(s).dump();  // a JSON string is a YAML double-quoted scalar
}

std::string yaml_scalar_text(const nlohmann::json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    return needs_quotes(s) ? quoted(s) : s;
  }
  return v.dump();
}

void yaml_walk(std::string& out, const nlohmann::json& v, int indent) {
  std::string pad(static_cast<size_t>(indent), ' ');
  if (v.is_object()) {
    for (const auto& [k, item] : v.items()) {
      std::string key = needs_quotes(k) ? quoted(k) : k;
      if (item.is_structured() && !item.empty()) {
        out += pad + key + ":\n";
        // PyYAML's block style: a list under a key is not indented further.
        yaml_walk(out, item, item.is_array() ? indent : indent + 2);
      } else {
        out += pad + key + ": " +
               (item.is_structured() ? (item.is_object() ? "{}" : "[]") : yaml_scalar_text(item)) +
               "\n";
      }
    }
  } else if (v.is_array()) {
    for (const auto& item : v) {
      if (item.is_structured() && !item.empty()) {
        std::string inner;
        yaml_walk(inner, item, indent + 2);
        // The first line of the item goes after the dash.
        out += pad + "- " + inner.substr(static_cast<size_t>(indent) + 2);
      } else {
        out += pad + "- " +
               (item.is_structured() ? (item.is_object() ? "{}" : "[]") : yaml_scalar_text(item)) +
               "\n";
      }
    }
  } else {
    out += pad + yaml_scalar_text(v) + "\n";
  }
}

}  // namespace

std::string yaml_out(const std::string& id, const nlohmann::json& value) {
  std::string out;
  yaml_walk(out, nlohmann::json{{id, value}}, 0);
  return out;
}

std::string python_repr(const nlohmann::json& v) {
  if (v.is_null()) return "None";
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_string()) return base::python_repr(v.get<std::string>());
  if (v.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + python_repr(v[i]);
    return out + "]";
  }
  if (v.is_object()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [k, item] : v.items()) {
      out += (first ? "" : ", ") + base::python_repr(k) + ": " + python_repr(item);
      first = false;
    }
    return out + "}";
  }
  return v.dump();
}

std::string txt_out(const std::string& id, const nlohmann::json& value) {
  if (!value.is_string()) return id + ": " + python_repr(value) + "\n";
  // Python's str.splitlines(): no line after a final newline, none for "".
  std::string out;
  const auto& s = value.get_ref<const std::string&>();
  size_t start = 0;
  while (start < s.size()) {
    size_t nl = s.find('\n', start);
    if (nl == std::string::npos) nl = s.size();
    out += id + ": " + s.substr(start, nl - start) + "\n";
    start = nl + 1;
  }
  return out;
}

// Salt's yamlify_arg: a word of the command line as YAML, but text where
// YAML would lose or invent something: a mapping without its braces or a
// list without its brackets ('^root:', '- x'), a comment swallowing text
// ('a#b'), digits with underscores, words with tabs or line breaks, empty or
// marker words, and '|', '!' and '#...' that YAML reads as empty or null.
nlohmann::json parse_arg(const std::string& text) {
  std::string stripped = text;
  stripped.erase(0, std::min(stripped.find_first_not_of(" \t\r\n"), stripped.size()));
  stripped.erase(stripped.find_last_not_of(" \t\r\n") + 1);
  if (stripped.empty() || stripped == "---" || stripped == "...") return text;
  if (text.find('_') != std::string::npos &&
      stripped.find_first_not_of("0123456789_") == std::string::npos) {
    return text;
  }
  if (text.find_first_of("\t\r\n") != std::string::npos) return text;
  if (text == "None") return nullptr;
  nlohmann::json v;
  try {
    v = base::yaml_to_json(YAML::Load(text));
  } catch (const YAML::Exception&) {
    return text;
  } catch (const base::error&) {
    return text;
  }
  if (text.find('#') != std::string::npos) {
    return v.is_string() || v.is_null() ? nlohmann::json(text) : v;
  }
  if (v.is_object()) return text.starts_with("{") ? v : nlohmann::json(text);
  if (v.is_array()) return text.starts_with("[") ? v : nlohmann::json(text);
  if (v.is_string() && v.get_ref<const std::string&>().empty() && (text == "|" || text == "!")) {
    return text;
  }
  if (v.is_null() && text == "!") return text;
  return v;
}

void split_args(const std::vector<std::string>& words, nlohmann::json& args,
                nlohmann::json& kwargs) {
  args = nlohmann::json::array();
  kwargs = nlohmann::json::object();
  for (const auto& w : words) {
    auto eq = w.find('=');
    bool is_kwarg = eq != std::string::npos && eq > 0;
    for (size_t i = 0; is_kwarg && i < eq; ++i) {
      unsigned char c = static_cast<unsigned char>(w[i]);
      if (!std::isalnum(c) && c != '_') is_kwarg = false;
    }
    if (is_kwarg) {
      kwargs[w.substr(0, eq)] = parse_arg(w.substr(eq + 1));
    } else {
      args.push_back(parse_arg(w));
    }
  }
}

nlohmann::json plain_json(const nlohmann::ordered_json& value) {
  return nlohmann::json::parse(
      value.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
}

}  // namespace brine::cli
