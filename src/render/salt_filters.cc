#include "render/salt_filters.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <arpa/inet.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pcre2.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <functional>
#include <memory>
#include <optional>
#include <random>

#include "base/python.h"
#include "render/python_json.h"
#include "render/yaml.h"

namespace brine::render::detail {
namespace {

using fmap = std::map<std::string, filter_fn>;
using tmap = std::map<std::string, test_fn>;

[[noreturn]] void unsupported(const std::string& name, const std::string& why) {
  throw template_error("filter '" + name + "' is not supported by brine: " + why);
}

// Salt's _handle_strict_undefined: a filter given data holding an undefined
// value fails with that value's message.
void require_defined(const value& v, int depth = 0) {
  if (depth > 200) return;
  v.defined();
  if (v.is_sequence_like()) {
    for (const auto& e : v.items()) require_defined(e, depth + 1);
  } else if (v.is_dict()) {
    for (const auto& [k, e] : v.dict().entries) require_defined(e, depth + 1);
  }
}

const std::string& string_input(const value& v, const char* filter) {
  v.defined();
  if (!v.is_string()) {
    throw template_error(std::string(filter) + ": expected a string, got " + type_name(v));
  }
  return v.as_string();
}

// Python's to_bytes(str(...)) for the hash filters: str only, as Salt's
// to_bytes raises TypeError for anything else.
const std::string& bytes_input(const value& v, const char* filter) {
  v.defined();
  if (!v.is_string()) {
    throw template_error(std::string(filter) + ": expected str, bytes, or bytearray not <class '" +
                         type_name(v) + "'>");
  }
  return v.as_string();
}

std::vector<value> sequence_of(const value& v) { return iterate(v); }

bool contains_value(const std::vector<value>& items, const value& x) {
  return std::any_of(items.begin(), items.end(), [&](const value& e) { return equal(e, x); });
}

// --- JSON (Python's json.dumps) ---

// json.dumps's keyword arguments that change the text, over `o`.
json_dumps_options json_options_from(call_args& a, json_dumps_options o) {
  o.indent = json_indent(argument(a, 0, "indent", nullptr));
  for (const auto& [k, v] : a.keyword) {
    if (k == "sort_keys") {
      o.sort_keys = v.truthy();
    } else if (k == "ensure_ascii") {
      o.ensure_ascii = v.truthy();
    } else if (k == "separators") {
      auto parts = iterate(v);
      if (parts.size() != 2) throw template_error("separators must be a pair of strings");
      o.item_separator = parts[0].str();
      o.key_separator = parts[1].str();
    } else if (k != "indent") {
      throw template_error("json option '" + k + "' is not supported by brine");
    }
  }
  return o;
}

// SerializerExtension.format_json(value, sort_keys=True, indent=None).
value f_json(interpreter&, const value& v, call_args& a) {
  require_defined(v);
  json_dumps_options o;
  o.ensure_ascii = false;
  o.sort_keys = argument(a, 0, "sort_keys", true).truthy();
  o.indent = json_indent(argument(a, 1, "indent", nullptr));
  std::string s = python_json_dumps(v, o);
  auto e = s.find_last_not_of(" \t\n\r");
  return s.substr(0, e == std::string::npos ? 0 : e + 1);
}

// Salt's tojson: ensure_ascii, keys in their order unless sort_keys, HTML
// characters escaped as Jinja's.
value salt_tojson(const value& v, call_args& a) {
  require_defined(v);
  json_dumps_options o;
  o.html_safe = true;
  return python_json_dumps(v, json_options_from(a, o));
}

// --- YAML ---

value f_yaml(interpreter&, const value& v, call_args& a) {
  require_defined(v);
  value flow = argument(a, 0, "flow_style", true);
  yaml_dump_options o;
  o.flow_style = flow.is_none()  ? yaml_dump_options::flow::leaves
                 : flow.truthy() ? yaml_dump_options::flow::always
                                 : yaml_dump_options::flow::never;
  o.ordered_dicts_in_order = true;  // salt.utils.yaml.safe_dump: SafeOrderedDumper
  return dump_yaml(v, o);
}

value f_load_yaml(interpreter&, const value& v, call_args&) {
  v.defined();
  if (!v.is_string()) throw template_error("Unable to load yaml from " + v.str());
  try {
    return load_yaml_value(v.as_string(), "load_yaml");
  } catch (const yaml_error& e) {
    throw template_error("Encountered error loading yaml: " + e.message() +
                         (e.line() > 0 ? " (line " + std::to_string(e.line()) + ")" : ""));
  }
}

value f_load_json(interpreter&, const value& v, call_args&) {
  v.defined();
  if (!v.is_string()) throw template_error("Unable to load json from " + v.str());
  try {
    return value::from_json(nlohmann::ordered_json::parse(v.as_string()));
  } catch (const nlohmann::json::exception&) {
    throw template_error("Unable to load json from " + v.as_string());
  }
}

value f_load_text(interpreter&, const value& v, call_args&) { return v.defined(); }

std::vector<char32_t> code_points(const std::string& s) {
  std::vector<char32_t> out;
  for (std::size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
    if (i + n > s.size()) n = 1;
    char32_t cp = n == 1 ? c : c & (0xff >> (n + 1));
    for (std::size_t k = 1; k < n; ++k)
      cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
    out.push_back(cp);
    i += n;
  }
  return out;
}

// PyYAML's pure-Python Emitter.write_double_quoted with an unbounded width
// and allow_unicode off (yaml_dquote builds a bare Emitter).
std::string yaml_double_quoted(const std::string& text) {
  std::string out = "\"";
  for (char32_t ch : code_points(text)) {
    bool plain = ch >= 0x20 && ch <= 0x7e && ch != '"' && ch != '\\';
    if (plain) {
      out += static_cast<char>(ch);
      continue;
    }
    static const std::map<char32_t, const char*> k_escapes = {
        {0, "0"},     {7, "a"},    {8, "b"},    {9, "t"},      {10, "n"},
        {11, "v"},    {12, "f"},   {13, "r"},   {27, "e"},     {'"', "\""},
        {'\\', "\\"}, {0x85, "N"}, {0xa0, "_"}, {0x2028, "L"}, {0x2029, "P"}};
    char buf[16];
    if (auto it = k_escapes.find(ch); it != k_escapes.end()) {
      std::snprintf(buf, sizeof buf, "\\%s", it->second);
    } else if (ch <= 0xff) {
      std::snprintf(buf, sizeof buf, "\\x%02X", static_cast<unsigned>(ch));
    } else if (ch <= 0xffff) {
      std::snprintf(buf, sizeof buf, "\\u%04X", static_cast<unsigned>(ch));
    } else {
      std::snprintf(buf, sizeof buf, "\\U%08X", static_cast<unsigned>(ch));
    }
    out += buf;
  }
  return out + "\"";
}

value f_yaml_dquote(interpreter&, const value& v, call_args&) {
  return yaml_double_quoted(v.defined().str());
}

// Emitter.write_single_quoted: quotes doubled; a line break is written as
// two (a single one would fold into a space when read back).
value f_yaml_squote(interpreter&, const value& v, call_args&) {
  std::string text = v.defined().str();
  std::string out = "'";
  bool breaks = false;
  for (char c : text) {
    if (c == '\n') {
      if (!breaks) out += '\n';
      out += '\n';
      breaks = true;
      continue;
    }
    breaks = false;
    if (c == '\'') out += '\'';
    out += c;
  }
  return out + "'";
}

value f_yaml_encode(interpreter&, const value& v, call_args&) {
  v.defined();
  switch (v.type()) {
    case value::kind::none:
      return "null";
    case value::kind::boolean:
      return v.as_bool() ? "true" : "false";
    case value::kind::integer:
    case value::kind::floating: {
      yaml_dump_options o;
      return dump_yaml(v, o);
    }
    case value::kind::string:
      return yaml_double_quoted(v.as_string());
    default:
      throw template_error("yaml_encode() only works with YAML scalar data; failed for <class '" +
                           type_name(v) + "'>");
  }
}

// --- salt.utils.jinja ---

value f_skip(interpreter&, const value&, call_args&) { return ""; }

value f_sequence(interpreter&, const value& v, call_args&) {
  if (v.is_sequence_like() || v.is_dict()) return v;
  return value::make_list({v});
}

bool to_bool(const value& v) {
  if (v.is_none()) return false;
  if (v.is_bool()) return v.as_bool();
  if (v.is_string()) {
    std::string l = v.as_string();
    for (auto& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return l == "yes" || l == "1" || l == "true";
  }
  if (v.is_int()) return v.as_int() > 0;
  if (v.is_list() || v.is_dict())
    return v.is_list() ? !v.items().empty() : !v.dict().entries.empty();
  return false;
}

value f_to_bool(interpreter&, const value& v, call_args&) { return to_bool(v.defined()); }

// shlex.quote.
value f_quote(interpreter&, const value& v, call_args&) {
  const std::string& s = string_input(v, "quote");
  if (s.empty()) return "''";
  bool safe = std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string("@%+=:,./-_").find(c) != std::string::npos;
  });
  if (safe) return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\"'\"'") : std::string(1, c);
  return out + "'";
}

// re.escape (Python 3.7+).
value f_regex_escape(interpreter&, const value& v, call_args&) {
  const std::string& s = string_input(v, "regex_escape");
  std::string out;
  for (char c : s) {
    if (std::string("()[]{}?*+-|^$\\.&~# \t\n\r\v\f").find(c) != std::string::npos) out += '\\';
    out += c;
  }
  return out;
}

// A Python `re` pattern compiled by PCRE2. Python spells "end of string"
// \Z where PCRE2 spells it \z; the rest of the syntax Salt users write
// ((?P<name>), (?P=name), lookarounds, classes) PCRE2 reads the same.
class regex {
 public:
  regex(const std::string& pattern, bool ignorecase, bool multiline) {
    std::string p;
    for (std::size_t i = 0; i < pattern.size(); ++i) {
      if (pattern[i] == '\\' && i + 1 < pattern.size()) {
        p += pattern[i];
        p += pattern[i + 1] == 'Z' ? 'z' : pattern[i + 1];
        ++i;
      } else {
        p += pattern[i];
      }
    }
    uint32_t opts = PCRE2_UTF | PCRE2_UCP;
    if (ignorecase) opts |= PCRE2_CASELESS;
    if (multiline) opts |= PCRE2_MULTILINE;
    int err = 0;
    PCRE2_SIZE at = 0;
    code_ =
        pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.data()), p.size(), opts, &err, &at, nullptr);
    if (code_ == nullptr) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      throw template_error("bad regular expression '" + pattern + "' at position " +
                           std::to_string(at) + ": " + reinterpret_cast<const char*>(msg));
    }
    match_ = pcre2_match_data_create_from_pattern(code_, nullptr);
  }
  ~regex() {
    pcre2_match_data_free(match_);
    pcre2_code_free(code_);
  }
  regex(const regex&) = delete;
  regex& operator=(const regex&) = delete;

  bool search(const std::string& s, std::size_t start, uint32_t opts = 0) {
    int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), start, opts,
                         match_, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) return false;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      throw template_error(std::string("regular expression match failed: ") +
                           reinterpret_cast<const char*>(msg));
    }
    return true;
  }
  std::size_t begin(int g) const { return pcre2_get_ovector_pointer(match_)[2 * g]; }
  std::size_t end(int g) const { return pcre2_get_ovector_pointer(match_)[2 * g + 1]; }
  bool matched(int g) const { return begin(g) != PCRE2_UNSET; }
  int groups() const {
    uint32_t n = 0;
    pcre2_pattern_info(code_, PCRE2_INFO_CAPTURECOUNT, &n);
    return static_cast<int>(n);
  }
  int group_number(const std::string& name) const {
    return pcre2_substring_number_from_name(code_, reinterpret_cast<PCRE2_SPTR>(name.c_str()));
  }
  value group_tuple(const std::string& s) const {
    std::vector<value> out;
    for (int g = 1; g <= groups(); ++g) {
      out.push_back(matched(g) ? value(s.substr(begin(g), end(g) - begin(g))) : value(nullptr));
    }
    return value::make_tuple(std::move(out));
  }

 private:
  pcre2_code* code_ = nullptr;
  pcre2_match_data* match_ = nullptr;
};

struct regex_call {
  std::string text;
  std::string pattern;
  bool ignorecase;
  bool multiline;
};

regex_call regex_arguments(const value& v, call_args& a, const char* filter) {
  regex_call c;
  c.text = string_input(v, filter);
  c.pattern = argument(a, 0, "rgx").str();
  c.ignorecase = argument(a, 1, "ignorecase", false).truthy();
  c.multiline = argument(a, 2, "multiline", false).truthy();
  return c;
}

value f_regex_search(interpreter&, const value& v, call_args& a) {
  regex_call c = regex_arguments(v, a, "regex_search");
  regex re(c.pattern, c.ignorecase, c.multiline);
  if (!re.search(c.text, 0)) return nullptr;
  return re.group_tuple(c.text);
}

value f_regex_match(interpreter&, const value& v, call_args& a) {
  regex_call c = regex_arguments(v, a, "regex_match");
  regex re(c.pattern, c.ignorecase, c.multiline);
  if (!re.search(c.text, 0, PCRE2_ANCHORED)) return nullptr;
  return re.group_tuple(c.text);
}

// Python's replacement template: literal text and group references.
struct piece {
  std::string literal;
  int group = -1;
};

std::vector<piece> parse_replacement(const std::string& repl, const regex& re) {
  std::vector<piece> out(1);
  auto digit = [](char ch) { return ch >= '0' && ch <= '9'; };
  auto group = [&](int g) {
    if (g < 0 || g > re.groups()) {
      throw template_error("invalid group reference " + std::to_string(g));
    }
    out.push_back({"", g});
    out.push_back({});
  };
  for (std::size_t i = 0; i < repl.size(); ++i) {
    char ch = repl[i];
    if (ch != '\\') {
      out.back().literal += ch;
      continue;
    }
    if (i + 1 >= repl.size()) throw template_error("bad escape (end of pattern)");
    char e = repl[++i];
    if (e == 'g') {
      auto close = repl.find('>', i);
      if (i + 1 >= repl.size() || repl[i + 1] != '<' || close == std::string::npos) {
        throw template_error("missing group name");
      }
      std::string name = repl.substr(i + 2, close - i - 2);
      if (!name.empty() && std::all_of(name.begin(), name.end(), digit)) {
        group(std::stoi(name));
      } else {
        int g = re.group_number(name);
        if (g < 0) throw template_error("unknown group name '" + name + "'");
        group(g);
      }
      i = close;
    } else if (digit(e) && e != '0') {
      int g = e - '0';
      if (i + 1 < repl.size() && digit(repl[i + 1])) g = g * 10 + (repl[++i] - '0');
      group(g);
    } else {
      static const std::string_view from = "abfnrtv\\0",
                                    to = std::string_view("\a\b\f\n\r\t\v\\\0", 9);
      if (auto at = from.find(e); at != std::string_view::npos) {
        out.back().literal += to[at];
      } else if (std::isalpha(static_cast<unsigned char>(e))) {
        throw template_error(std::string("bad escape \\") + e);
      } else {
        out.back().literal += '\\';
        out.back().literal += e;
      }
    }
  }
  return out;
}

value f_regex_replace(interpreter&, const value& v, call_args& a) {
  regex_call c = regex_arguments(v, a, "regex_replace");
  // regex_replace(txt, rgx, val, ignorecase, multiline): val is second.
  std::string repl = argument(a, 1, "val").str();
  c.ignorecase = argument(a, 2, "ignorecase", false).truthy();
  c.multiline = argument(a, 3, "multiline", false).truthy();
  regex re(c.pattern, c.ignorecase, c.multiline);
  auto tpl = parse_replacement(repl, re);
  const std::string& s = c.text;
  std::string out;
  std::size_t copied = 0, at = 0;
  bool after_empty = false;
  while (at <= s.size()) {
    bool found = false;
    if (after_empty) {
      // Python 3.7+: after an empty match, a non-empty match may start at
      // the same place; otherwise move on one character.
      found = re.search(s, at, PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED);
      if (!found) {
        if (at >= s.size()) break;
        ++at;
        while (at < s.size() && (static_cast<unsigned char>(s[at]) & 0xc0) == 0x80) ++at;
      }
    }
    if (!found && !re.search(s, at)) break;
    out += s.substr(copied, re.begin(0) - copied);
    for (const auto& p : tpl) {
      out += p.literal;
      if (p.group >= 0 && re.matched(p.group)) {
        out += s.substr(re.begin(p.group), re.end(p.group) - re.begin(p.group));
      }
    }
    copied = re.end(0);
    after_empty = re.begin(0) == re.end(0);
    at = re.end(0);
  }
  out += s.substr(std::min(copied, s.size()));
  return out;
}

bool t_match(interpreter&, const value& v, call_args& a) {
  const std::string& s = string_input(v, "match");
  regex re(argument(a, 0, "rgx").str(), argument(a, 1, "ignorecase", false).truthy(),
           argument(a, 2, "multiline", false).truthy());
  return re.search(s, 0, PCRE2_ANCHORED);
}

bool t_equalto(interpreter&, const value& v, call_args& a) {
  return equal(v, argument(a, 0, "other"));
}

bool t_list(interpreter&, const value& v, call_args&) { return v.is_list(); }

std::string digest_hex(const EVP_MD* md, const std::string& data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(data.data(), data.size(), out, &n, md, nullptr);
  std::string hex;
  char buf[3];
  for (unsigned int i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof buf, "%02x", out[i]);
    hex += buf;
  }
  return hex;
}

// uuid.uuid5(GLOBAL_UUID, str(val)), Salt's namespace 91633EBF-1C86-5E33-935A-28061F4B480E.
value f_uuid(interpreter&, const value& v, call_args&) {
  static const unsigned char k_namespace[16] = {0x91, 0x63, 0x3e, 0xbf, 0x1c, 0x86, 0x5e, 0x33,
                                                0x93, 0x5a, 0x28, 0x06, 0x1f, 0x4b, 0x48, 0x0e};
  std::string data(reinterpret_cast<const char*>(k_namespace), 16);
  data += bytes_input(v, "uuid");
  unsigned char h[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(data.data(), data.size(), h, &n, EVP_sha1(), nullptr);
  h[6] = static_cast<unsigned char>((h[6] & 0x0f) | 0x50);
  h[8] = static_cast<unsigned char>((h[8] & 0x3f) | 0x80);
  std::string out;
  char buf[3];
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    std::snprintf(buf, sizeof buf, "%02x", h[i]);
    out += buf;
  }
  return out;
}

// Python's set() of a str or tuple iterates in hash order, which differs
// between runs; brine does not imitate that.
void refuse_set_result(const char* filter, const value& a, const value* b = nullptr) {
  auto hashable = [](const value& x) { return x.is_string() || x.is_tuple(); };
  if (hashable(a) && (b == nullptr || hashable(*b))) {
    throw template_error(std::string("filter '") + filter +
                         "' of a string or tuple gives a Python set, whose order is not "
                         "deterministic; brine does not support it (pass a list)");
  }
}

std::vector<value> unique_values(const std::vector<value>& items) {
  std::vector<value> out;
  for (const auto& e : items)
    if (!contains_value(out, e)) out.push_back(e);
  return out;
}

value salt_unique(const value& v, call_args&) {
  v.defined();
  refuse_set_result("unique", v);
  return value::make_list(unique_values(sequence_of(v)));
}

value min_max(const value& v, bool want_max, const char* name) {
  auto items = sequence_of(v);
  if (items.empty()) throw template_error(std::string(name) + "() arg is an empty sequence");
  std::size_t best = 0;
  for (std::size_t i = 1; i < items.size(); ++i) {
    if (want_max ? less(items[best], items[i]) : less(items[i], items[best])) best = i;
  }
  return items[best];
}

value salt_min(const value& v, call_args&) { return min_max(v, false, "min"); }
value salt_max(const value& v, call_args&) { return min_max(v, true, "max"); }

value f_avg(interpreter&, const value& v, call_args&) {
  v.defined();
  if (v.is_number()) return v.to_double();
  auto items = sequence_of(v);
  if (items.empty()) throw template_error("division by zero");
  value total = 0;
  for (const auto& e : items) total = binary_op("+", total, e);
  return binary_op("/", total, value(static_cast<std::int64_t>(items.size()))).to_double();
}

std::vector<value> list_operand(const value& v) {
  v.defined();
  return sequence_of(v);
}

value f_union(interpreter&, const value& v, call_args& a) {
  value other = argument(a, 0, "lst2");
  refuse_set_result("union", v, &other);
  auto x = list_operand(v);
  auto y = list_operand(other);
  x.insert(x.end(), y.begin(), y.end());
  return value::make_list(unique_values(x));
}

value f_intersect(interpreter&, const value& v, call_args& a) {
  value other = argument(a, 0, "lst2");
  refuse_set_result("intersect", v, &other);
  auto y = list_operand(other);
  std::vector<value> out;
  for (const auto& e : list_operand(v))
    if (contains_value(y, e)) out.push_back(e);
  return value::make_list(unique_values(out));
}

value f_difference(interpreter&, const value& v, call_args& a) {
  value other = argument(a, 0, "lst2");
  refuse_set_result("difference", v, &other);
  auto y = list_operand(other);
  std::vector<value> out;
  for (const auto& e : list_operand(v))
    if (!contains_value(y, e)) out.push_back(e);
  return value::make_list(unique_values(out));
}

value f_symmetric_difference(interpreter&, const value& v, call_args& a) {
  value other = argument(a, 0, "lst2");
  refuse_set_result("symmetric_difference", v, &other);
  auto x = list_operand(v);
  auto y = list_operand(other);
  std::vector<value> both = x;
  both.insert(both.end(), y.begin(), y.end());
  std::vector<value> common;
  for (const auto& e : x)
    if (contains_value(y, e)) common.push_back(e);
  std::vector<value> out;
  for (const auto& e : unique_values(both))
    if (!contains_value(common, e)) out.push_back(e);
  return value::make_list(unique_values(out));
}

// getattr(obj, f_name, lambda *a, **k: None)(*args, **kwargs).
value f_method_call(interpreter& in, const value& v, call_args& a) {
  if (a.positional.empty()) throw template_error("method_call: missing method name");
  std::string name = a.positional[0].str();
  value m = method(v, name);
  if (m.is_undefined()) return nullptr;
  call_args rest;
  rest.positional.assign(a.positional.begin() + 1, a.positional.end());
  rest.keyword = a.keyword;
  return in.call(m, rest);
}

// --- salt.utils.data ---

std::optional<std::int64_t> python_int(const std::string& s) {
  std::string t = s;
  t.erase(0, t.find_first_not_of(" \t\n\r\f\v"));
  t.erase(t.find_last_not_of(" \t\n\r\f\v") + 1);
  std::string digits;
  std::size_t i = 0;
  if (!t.empty() && (t[0] == '-' || t[0] == '+')) digits += t[i++];
  if (i >= t.size()) return std::nullopt;
  for (; i < t.size(); ++i) {
    if (t[i] == '_' && i + 1 < t.size() && std::isdigit(static_cast<unsigned char>(t[i + 1])) &&
        std::isdigit(static_cast<unsigned char>(t[i - 1]))) {
      continue;
    }
    if (!std::isdigit(static_cast<unsigned char>(t[i]))) return std::nullopt;
    digits += t[i];
  }
  errno = 0;
  char* end = nullptr;
  long long n = std::strtoll(digits.c_str(), &end, 10);
  if (errno == ERANGE) throw template_error("integer out of range: " + s);
  return static_cast<std::int64_t>(n);
}

value f_traverse(interpreter&, const value& v, call_args& a) {
  value key = argument(a, 0, "key");
  value dflt = argument(a, 1, "default", nullptr);
  std::string delimiter = argument(a, 2, "delimiter", ":").str();
  std::vector<value> parts;
  if (key.is_string()) {
    const std::string& k = key.as_string();
    std::size_t at = 0;
    while (true) {
      auto next = delimiter.empty() ? std::string::npos : k.find(delimiter, at);
      parts.emplace_back(k.substr(at, next == std::string::npos ? std::string::npos : next - at));
      if (next == std::string::npos) break;
      at = next + delimiter.size();
    }
  } else if (key.is_int()) {
    parts.push_back(key);
  } else {
    parts = iterate(key);
  }
  value ptr = v;
  for (const auto& each : parts) {
    if (ptr.is_list()) {
      std::optional<std::int64_t> idx;
      if (each.is_int()) {
        idx = each.as_int();
      } else if (each.is_string()) {
        idx = python_int(each.as_string());
      }
      bool embed = false;
      for (const auto& item : ptr.items()) {
        if (!item.is_dict()) continue;
        value* hit = item.dict().find(idx ? value(*idx) : each);
        if (hit) {
          ptr = *hit;
          embed = true;
          break;
        }
      }
      if (embed) continue;
      if (!idx) return dflt;
      auto n = static_cast<std::int64_t>(ptr.items().size());
      std::int64_t i = *idx < 0 ? *idx + n : *idx;
      if (i < 0 || i >= n) return dflt;
      ptr = ptr.items()[static_cast<std::size_t>(i)];
    } else if (ptr.is_dict()) {
      value* hit = ptr.dict().find(each);
      if (!hit && each.is_string()) {
        // Salt YAML-loads the key to find integer or float keys.
        try {
          value loaded = load_yaml_value(each.as_string(), "traverse");
          hit = ptr.dict().find(loaded);
        } catch (const template_error&) {
        }
      }
      if (!hit) return dflt;
      ptr = *hit;
    } else {
      // Salt: ptr[each] on a str or other value; TypeError/IndexError give the default.
      return dflt;
    }
  }
  return ptr;
}

value f_compare_dicts(interpreter&, const value& v, call_args& a) {
  value old = v.is_none() ? value::make_dict() : v;
  value nw = argument(a, 0, "new", nullptr);
  if (nw.is_none()) nw = value::make_dict();
  if (!old.is_dict() || !nw.is_dict()) throw template_error("compare_dicts: expected two dicts");
  value ret = value::make_dict();
  // set(new).union(old): Python's set order; brine takes new's keys, then old's.
  std::vector<value> keys;
  for (const auto& [k, e] : nw.dict().entries) keys.push_back(k);
  for (const auto& [k, e] : old.dict().entries)
    if (!contains_value(keys, k)) keys.push_back(k);
  for (const auto& k : keys) {
    value* o = old.dict().find(k);
    value* n = nw.dict().find(k);
    value change = value::make_dict();
    if (!o) {
      change.dict().set("old", "");
      change.dict().set("new", *n);
    } else if (!n) {
      change.dict().set("new", "");
      change.dict().set("old", *o);
    } else if (!equal(*n, *o)) {
      change.dict().set("old", *o);
      change.dict().set("new", *n);
    } else {
      continue;
    }
    ret.dict().set(k, change);
  }
  return ret;
}

value f_compare_lists(interpreter&, const value& v, call_args& a) {
  auto old = iterate(v);
  auto nw = iterate(argument(a, 0, "new"));
  value ret = value::make_dict();
  std::vector<value> added, removed;
  for (const auto& e : nw)
    if (!contains_value(old, e)) added.push_back(e);
  for (const auto& e : old)
    if (!contains_value(nw, e)) removed.push_back(e);
  if (!added.empty()) ret.dict().set("new", value::make_list(added));
  if (!removed.empty()) ret.dict().set("old", value::make_list(removed));
  return ret;
}

value f_exactly_n_true(interpreter&, const value& v, call_args& a) {
  std::int64_t amount = to_int(argument(a, 0, "amount", 1), "amount");
  std::int64_t n = 0;
  for (const auto& e : iterate(v))
    if (e.truthy()) ++n;
  return n == std::max<std::int64_t>(amount, 0);
}

value f_exactly_one_true(interpreter& in, const value& v, call_args&) {
  call_args none;
  return f_exactly_n_true(in, v, none);
}

value f_is_list(interpreter&, const value& v, call_args&) { return v.is_list(); }

value f_is_iter(interpreter&, const value& v, call_args&) {
  if (v.is_string()) return false;
  return v.is_sequence_like() || v.is_dict();
}

value f_sorted_ignorecase(interpreter&, const value& v, call_args&) {
  auto items = iterate(v);
  std::vector<std::pair<std::string, value>> keyed;
  for (auto& e : items) {
    if (!e.is_string())
      throw template_error("'" + type_name(e) + "' object has no attribute 'lower'");
    std::string l = e.as_string();
    for (auto& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    keyed.emplace_back(l, e);
  }
  std::stable_sort(keyed.begin(), keyed.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<value> out;
  for (auto& [k, e] : keyed) out.push_back(e);
  return value::make_list(std::move(out));
}

value f_substring_in_list(interpreter&, const value& v, call_args& a) {
  for (const auto& s : iterate(argument(a, 0, "list_to_search"))) {
    if (contains(s, v)) return true;
  }
  return false;
}

// salt.utils.data.flatten: None, "None" and "null" dropped unless
// preserve_nulls; every non-string iterable (a list, tuple or dict, whose
// keys it gives) flattened while levels remain.
void flatten_into(const value& data, std::int64_t levels, bool preserve_nulls,
                  std::vector<const void*>& seen, std::vector<value>& out) {
  if (data.identity() != nullptr &&
      std::find(seen.begin(), seen.end(), data.identity()) != seen.end()) {
    throw template_error("Reference cycle detected. Check input list.");
  }
  seen.push_back(data.identity());
  for (const auto& e : iterate(data)) {
    bool null =
        e.is_none() || (e.is_string() && (e.as_string() == "None" || e.as_string() == "null"));
    if (null && !preserve_nulls) continue;
    if ((e.is_sequence_like() || e.is_dict()) && levels != 0) {
      flatten_into(e, levels > 0 ? levels - 1 : levels, preserve_nulls, seen, out);
    } else {
      out.push_back(e);
    }
  }
  seen.pop_back();
}

value f_flatten(interpreter&, const value& v, call_args& a) {
  value levels = argument(a, 0, "levels", nullptr);
  bool preserve = argument(a, 1, "preserve_nulls", false).truthy();
  std::vector<value> out;
  std::vector<const void*> seen;
  flatten_into(v, levels.is_none() ? -1 : to_int(levels, "levels"), preserve, seen, out);
  return value::make_list(std::move(out));
}

value f_identity(interpreter&, const value& v, call_args&) { return v.defined(); }

// --- salt.utils.stringutils ---

value f_to_num(interpreter&, const value& v, call_args&) {
  v.defined();
  if (v.is_int() || v.is_float()) return v;
  if (v.is_bool()) return std::int64_t{v.as_bool()};
  if (!v.is_string()) throw template_error("to_num: expected a string, got " + type_name(v));
  if (auto i = python_int(v.as_string())) return *i;
  std::string t = v.as_string();
  t.erase(0, t.find_first_not_of(" \t\n\r\f\v"));
  t.erase(t.find_last_not_of(" \t\n\r\f\v") + 1);
  char* end = nullptr;
  double d = std::strtod(t.c_str(), &end);
  if (!t.empty() && *end == '\0' && t.find_first_of("xXpP") == std::string::npos) return d;
  return v;
}

value f_is_hex(interpreter&, const value& v, call_args&) {
  if (!v.is_string()) return v.is_int();
  std::string t = v.as_string();
  t.erase(0, t.find_first_not_of(" \t\n\r\f\v"));
  t.erase(t.find_last_not_of(" \t\n\r\f\v") + 1);
  std::size_t i = 0;
  if (i < t.size() && (t[i] == '-' || t[i] == '+')) ++i;
  if (t.size() > i + 1 && t[i] == '0' && (t[i + 1] == 'x' || t[i + 1] == 'X')) i += 2;
  if (i >= t.size()) return false;
  for (; i < t.size(); ++i) {
    if (!std::isxdigit(static_cast<unsigned char>(t[i])) && t[i] != '_') return false;
  }
  return true;
}

value f_contains_whitespace(interpreter&, const value& v, call_args&) {
  const std::string& s = string_input(v, "contains_whitespace");
  return std::any_of(s.begin(), s.end(),
                     [](char c) { return std::isspace(static_cast<unsigned char>(c)); });
}

// fnmatch.fnmatch on POSIX (case-sensitive): * ? [seq] [!seq].
bool fnmatch(const std::string& name, const std::string& pat, std::size_t n = 0,
             std::size_t p = 0) {
  while (p < pat.size()) {
    char c = pat[p];
    if (c == '*') {
      for (std::size_t k = n; k <= name.size(); ++k)
        if (fnmatch(name, pat, k, p + 1)) return true;
      return false;
    }
    if (n >= name.size()) return false;
    if (c == '?') {
      ++n;
      ++p;
      continue;
    }
    if (c == '[') {
      std::size_t q = p + 1;
      bool negate = q < pat.size() && pat[q] == '!';
      if (negate) ++q;
      std::size_t close = pat.find(']', q + 1);
      if (close == std::string::npos) {
        if (name[n] != '[') return false;
        ++n;
        ++p;
        continue;
      }
      bool hit = false;
      for (std::size_t k = q; k < close; ++k) {
        if (k + 2 < close && pat[k + 1] == '-') {
          if (name[n] >= pat[k] && name[n] <= pat[k + 2]) hit = true;
          k += 2;
        } else if (pat[k] == name[n]) {
          hit = true;
        }
      }
      if (hit == negate) return false;
      ++n;
      p = close + 1;
      continue;
    }
    if (name[n] != c) return false;
    ++n;
    ++p;
  }
  return n == name.size();
}

bool expr_match(const std::string& line, const std::string& expr) {
  if (fnmatch(line, expr)) return true;
  try {
    regex re("\\A(?:" + expr + ")\\z", false, false);
    return re.search(line, 0, PCRE2_ANCHORED);
  } catch (const template_error&) {
    return false;
  }
}

value f_check_whitelist_blacklist(interpreter&, const value& v, call_args& a) {
  std::string s = v.str();
  auto list_of = [](const value& x) {
    if (x.is_undefined() || !x.truthy()) return std::vector<value>{};
    if (x.is_string()) return std::vector<value>{x};
    return iterate(x);
  };
  auto white = list_of(argument(a, 0, "whitelist", nullptr));
  auto black = list_of(argument(a, 1, "blacklist", nullptr));
  auto any = [&](const std::vector<value>& l) {
    return std::any_of(l.begin(), l.end(), [&](const value& e) { return expr_match(s, e.str()); });
  };
  if (!black.empty() && white.empty()) return !any(black);
  if (!white.empty() && black.empty()) return any(white);
  if (!white.empty() && !black.empty()) return !any(black) && any(white);
  return true;
}

value f_to_snake_case(interpreter&, const value& v, call_args&) {
  const std::string& s = string_input(v, "to_snake_case");
  if (s.empty()) throw template_error("string index out of range");
  auto lower = [](char c) {
    return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  };
  auto is_upper = [](char c) { return std::isupper(static_cast<unsigned char>(c)) != 0; };
  auto is_lower = [](char c) { return std::islower(static_cast<unsigned char>(c)) != 0; };
  std::string res(1, lower(s[0]));
  for (std::size_t i = 1; i < s.size(); ++i) {
    if (is_upper(s[i]) && (is_lower(s[i - 1]) || (i != s.size() - 1 && is_lower(s[i + 1])))) {
      res += '_';
    }
    res += lower(s[i]);
  }
  return res;
}

std::string capitalize(const std::string& w) {
  std::string out;
  for (std::size_t i = 0; i < w.size(); ++i) {
    auto c = static_cast<unsigned char>(w[i]);
    out += static_cast<char>(i == 0 ? std::toupper(c) : std::tolower(c));
  }
  return out;
}

value f_to_camelcase(interpreter&, const value& v, call_args& a) {
  const std::string& s = string_input(v, "to_camelcase");
  bool upper = argument(a, 0, "uppercamel", false).truthy();
  std::vector<std::string> words;
  std::size_t at = 0;
  while (true) {
    auto next = s.find('_', at);
    words.push_back(s.substr(at, next == std::string::npos ? std::string::npos : next - at));
    if (next == std::string::npos) break;
    at = next + 1;
  }
  std::string out = upper ? capitalize(words[0]) : words[0];
  for (std::size_t i = 1; i < words.size(); ++i) out += capitalize(words[i]);
  return out;
}

// --- salt.utils.hashutils ---

value f_base64_encode(interpreter&, const value& v, call_args&) {
  const std::string& s = bytes_input(v, "base64_encode");
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < s.size(); i += 3) {
    std::uint32_t n = (static_cast<unsigned char>(s[i]) << 16) |
                      (static_cast<unsigned char>(s[i + 1]) << 8) |
                      static_cast<unsigned char>(s[i + 2]);
    out += k[(n >> 18) & 63];
    out += k[(n >> 12) & 63];
    out += k[(n >> 6) & 63];
    out += k[n & 63];
  }
  if (i < s.size()) {
    std::uint32_t n = static_cast<unsigned char>(s[i]) << 16;
    if (i + 1 < s.size()) n |= static_cast<unsigned char>(s[i + 1]) << 8;
    out += k[(n >> 18) & 63];
    out += k[(n >> 12) & 63];
    out += i + 1 < s.size() ? k[(n >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

bool valid_utf8(const std::string& s) {
  for (std::size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (std::size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return false;
    i += n;
  }
  return true;
}

// base64.b64decode without validate: characters outside the alphabet are
// dropped, then the padding must be right.
value f_base64_decode(interpreter&, const value& v, call_args&) {
  const std::string& s = bytes_input(v, "base64_decode");
  std::string clean;
  for (char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/' || c == '=') clean += c;
  }
  std::string data = clean.substr(0, clean.find('='));
  std::size_t padding = clean.size() - data.size();
  std::size_t rem = data.size() % 4;
  if (rem == 1) {
    throw template_error(
        "base64_decode: Invalid base64-encoded string: number of data characters (" +
        std::to_string(data.size()) + ") cannot be 1 more than a multiple of 4");
  }
  if ((rem == 2 && padding < 2) || (rem == 3 && padding < 1)) {
    throw template_error("base64_decode: Incorrect padding");
  }
  auto val = [](char c) -> std::uint32_t {
    if (c >= 'A' && c <= 'Z') return static_cast<std::uint32_t>(c - 'A');
    if (c >= 'a' && c <= 'z') return static_cast<std::uint32_t>(c - 'a' + 26);
    if (c >= '0' && c <= '9') return static_cast<std::uint32_t>(c - '0' + 52);
    return c == '+' ? 62u : 63u;
  };
  std::string out;
  std::uint32_t acc = 0;
  int bits = 0;
  for (char c : data) {
    acc = (acc << 6) | val(c);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  if (!valid_utf8(out)) {
    throw template_error(
        "base64_decode: the decoded data is not UTF-8 text (Salt returns bytes; brine templates "
        "have no bytes type)");
  }
  return out;
}

value f_md5(interpreter&, const value& v, call_args&) {
  return digest_hex(EVP_md5(), bytes_input(v, "md5"));
}
value f_sha1(interpreter&, const value& v, call_args&) {
  return digest_hex(EVP_sha1(), bytes_input(v, "sha1"));
}
value f_sha256(interpreter&, const value& v, call_args&) {
  return digest_hex(EVP_sha256(), bytes_input(v, "sha256"));
}
value f_sha512(interpreter&, const value& v, call_args&) {
  return digest_hex(EVP_sha512(), bytes_input(v, "sha512"));
}

std::string hmac_sha256(const std::string& key, const std::string& msg) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), out, &n);
  return std::string(reinterpret_cast<char*>(out), n);
}

value f_hmac_compute(interpreter&, const value& v, call_args& a) {
  std::string mac = hmac_sha256(bytes_input(argument(a, 0, "shared_secret"), "hmac_compute"),
                                bytes_input(v, "hmac_compute"));
  std::string hex;
  char buf[3];
  for (unsigned char c : mac) {
    std::snprintf(buf, sizeof buf, "%02x", c);
    hex += buf;
  }
  return hex;
}

value f_hmac(interpreter& in, const value& v, call_args& a) {
  std::string mac =
      hmac_sha256(bytes_input(argument(a, 0, "shared_secret"), "hmac"), bytes_input(v, "hmac"));
  call_args none;
  value encoded = f_base64_encode(in, value(mac), none);
  return encoded.as_string() == bytes_input(argument(a, 1, "challenge_hmac"), "hmac");
}

// --- salt.utils.path ---

// posixpath.normpath.
std::string normpath(const std::string& path) {
  if (path.empty()) return ".";
  int initial =
      path[0] == '/'
          ? (path.size() > 1 && path[1] == '/' && (path.size() == 2 || path[2] != '/') ? 2 : 1)
          : 0;
  std::vector<std::string> parts;
  std::size_t at = 0;
  while (at <= path.size()) {
    auto next = path.find('/', at);
    std::string comp = path.substr(at, next == std::string::npos ? std::string::npos : next - at);
    if (!comp.empty() && comp != ".") {
      if (comp != ".." || (initial == 0 && parts.empty()) ||
          (!parts.empty() && parts.back() == "..")) {
        parts.push_back(comp);
      } else if (!parts.empty()) {
        parts.pop_back();
      }
    }
    if (next == std::string::npos) break;
    at = next + 1;
  }
  std::string out(static_cast<std::size_t>(initial), '/');
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i ? "/" : "") + parts[i];
  return out.empty() ? "." : out;
}

// salt.utils.path.join on POSIX: each part normalised, later absolute parts
// appended rather than restarting the path.
value f_path_join(interpreter&, const value& v, call_args& a) {
  std::vector<std::string> parts;
  parts.push_back(normpath(v.defined().str()));
  for (const auto& p : a.positional) parts.push_back(normpath(p.defined().str()));
  for (const auto& [k, e] : a.keyword) {
    if (k != "use_posixpath")
      throw template_error("path_join: unexpected keyword argument '" + k + "'");
  }
  std::string root = parts[0];
  if (parts.size() == 1) return root;
  std::string out = root;
  for (std::size_t i = 1; i < parts.size(); ++i) {
    std::string p = parts[i];
    std::size_t k = 0;
    while (k < p.size() && p[k] == '/') ++k;
    p = p.substr(k);
    if (out.empty() || out.back() == '/') {
      out += p;
    } else {
      out += "/" + p;
    }
  }
  return normpath(out);
}

// --- itertools (the SerializerExtension registers them as filters) ---

std::vector<std::vector<std::size_t>> index_combinations(std::size_t n, std::size_t r,
                                                         bool replacement) {
  std::vector<std::vector<std::size_t>> out;
  if (!replacement && r > n) return out;
  if (replacement && n == 0 && r > 0) return out;
  std::vector<std::size_t> idx(r);
  for (std::size_t i = 0; i < r; ++i) idx[i] = replacement ? 0 : i;
  while (true) {
    out.push_back(idx);
    if (out.size() > 100000) throw template_error("itertools: more than 100000 results");
    std::size_t i = r;
    bool found = false;
    while (i > 0) {
      --i;
      if (idx[i] != (replacement ? n - 1 : i + n - r)) {
        found = true;
        break;
      }
    }
    if (!found) return out;
    ++idx[i];
    for (std::size_t j = i + 1; j < r; ++j) idx[j] = replacement ? idx[i] : idx[j - 1] + 1;
  }
}

value tuples_of(const std::vector<value>& pool, const std::vector<std::vector<std::size_t>>& idx) {
  std::vector<value> out;
  for (const auto& t : idx) {
    std::vector<value> items;
    for (auto i : t) items.push_back(pool[i]);
    out.push_back(value::make_tuple(std::move(items)));
  }
  return value::make_list(std::move(out));
}

value f_combinations(interpreter&, const value& v, call_args& a) {
  auto pool = iterate(v);
  auto r = to_int(argument(a, 0, "r"), "r");
  if (r < 0) throw template_error("r must be non-negative");
  return tuples_of(pool, index_combinations(pool.size(), static_cast<std::size_t>(r), false));
}

value f_combinations_with_replacement(interpreter&, const value& v, call_args& a) {
  auto pool = iterate(v);
  auto r = to_int(argument(a, 0, "r"), "r");
  if (r < 0) throw template_error("r must be non-negative");
  return tuples_of(pool, index_combinations(pool.size(), static_cast<std::size_t>(r), true));
}

value f_permutations(interpreter&, const value& v, call_args& a) {
  auto pool = iterate(v);
  value rv = argument(a, 0, "r", nullptr);
  std::size_t r = rv.is_none() ? pool.size() : static_cast<std::size_t>(to_int(rv, "r"));
  std::vector<std::vector<std::size_t>> out;
  // Python's order: lexicographic over index tuples of distinct indices.
  std::vector<std::size_t> cur;
  std::vector<bool> used(pool.size());
  std::function<void()> rec = [&]() {
    if (cur.size() == r) {
      out.push_back(cur);
      if (out.size() > 100000) throw template_error("itertools: more than 100000 results");
      return;
    }
    for (std::size_t i = 0; i < pool.size(); ++i) {
      if (used[i]) continue;
      used[i] = true;
      cur.push_back(i);
      rec();
      cur.pop_back();
      used[i] = false;
    }
  };
  if (r <= pool.size()) rec();
  return tuples_of(pool, out);
}

value f_product(interpreter&, const value& v, call_args& a) {
  std::vector<std::vector<value>> pools{iterate(v)};
  for (const auto& p : a.positional) pools.push_back(iterate(p));
  std::int64_t repeat = 1;
  for (const auto& [k, e] : a.keyword)
    if (k == "repeat") repeat = to_int(e, "repeat");
  std::vector<std::vector<value>> all;
  for (std::int64_t i = 0; i < repeat; ++i) all.insert(all.end(), pools.begin(), pools.end());
  std::vector<std::vector<value>> result{{}};
  for (const auto& pool : all) {
    std::vector<std::vector<value>> next;
    for (const auto& prefix : result) {
      for (const auto& e : pool) {
        auto t = prefix;
        t.push_back(e);
        next.push_back(std::move(t));
        if (next.size() > 100000) throw template_error("itertools: more than 100000 results");
      }
    }
    result = std::move(next);
  }
  std::vector<value> out;
  for (auto& t : result) out.push_back(value::make_tuple(std::move(t)));
  return value::make_list(std::move(out));
}

value zip_like(const value& v, call_args& a, bool longest) {
  std::vector<std::vector<value>> seqs{iterate(v)};
  for (const auto& p : a.positional) seqs.push_back(iterate(p));
  value fill = nullptr;
  for (const auto& [k, e] : a.keyword)
    if (k == "fillvalue") fill = e;
  std::size_t n = longest ? 0 : SIZE_MAX;
  for (const auto& s : seqs) n = longest ? std::max(n, s.size()) : std::min(n, s.size());
  std::vector<value> out;
  for (std::size_t i = 0; i < n; ++i) {
    std::vector<value> t;
    for (const auto& s : seqs) t.push_back(i < s.size() ? s[i] : fill);
    out.push_back(value::make_tuple(std::move(t)));
  }
  return value::make_list(std::move(out));
}

value f_zip(interpreter&, const value& v, call_args& a) { return zip_like(v, a, false); }
value f_zip_longest(interpreter&, const value& v, call_args& a) { return zip_like(v, a, true); }

value f_compress(interpreter&, const value& v, call_args& a) {
  auto data = iterate(v);
  auto sel = iterate(argument(a, 0, "selectors"));
  std::vector<value> out;
  for (std::size_t i = 0; i < std::min(data.size(), sel.size()); ++i)
    if (sel[i].truthy()) out.push_back(data[i]);
  return value::make_list(std::move(out));
}

// --- salt.utils.dictupdate ---

// The dict one level above `keys`' last part, made on the way when missing.
value& dict_path(value& d, const std::vector<std::string>& keys, const char* filter) {
  value* cur = &d;
  for (std::size_t i = 0; i + 1 < keys.size(); ++i) {
    if (!cur->is_dict())
      throw template_error(std::string(filter) + ": " + keys[i] + " is not a dict");
    value* next = cur->dict().find(value(keys[i]));
    if (!next) {
      cur->dict().set(value(keys[i]), value::make_dict());
      next = cur->dict().find(value(keys[i]));
    }
    cur = next;
  }
  if (!cur->is_dict()) throw template_error(std::string(filter) + ": not a dict");
  return *cur;
}

std::vector<std::string> split_keys(const std::string& s, const std::string& delimiter) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (true) {
    auto next = s.find(delimiter, at);
    out.push_back(s.substr(at, next == std::string::npos ? std::string::npos : next - at));
    if (next == std::string::npos) return out;
    at = next + delimiter.size();
  }
}

value dictupdate(const value& v, call_args& a, const char* filter) {
  value d = v.defined();
  if (!d.is_dict()) throw template_error(std::string(filter) + ": expected a dict");
  auto keys = split_keys(argument(a, 0, "keys").str(), argument(a, 2, "delimiter", ":").str());
  value val = argument(a, 1, "value");
  value& parent = dict_path(d, keys, filter);
  value key(keys.back());
  std::string f = filter;
  if (f == "set_dict_key_value") {
    parent.dict().set(key, val);
  } else {
    value* cur = parent.dict().find(key);
    if (f == "update_dict_key_value") {
      if (!cur) {
        parent.dict().set(key, value::make_dict());
        cur = parent.dict().find(key);
      }
      if (!cur->is_dict() || !val.is_dict()) {
        throw template_error(f + ": cannot update " + type_name(*cur) + " with " + type_name(val));
      }
      for (const auto& [k, e] : val.dict().entries) cur->dict().set(k, e);
    } else {
      if (!cur) {
        parent.dict().set(key, value::make_list());
        cur = parent.dict().find(key);
      }
      if (!cur->is_list()) throw template_error(f + ": cannot append to " + type_name(*cur));
      if (f == "append_dict_key_value") {
        cur->items().push_back(val);
      } else {
        if (!val.is_sequence_like())
          throw template_error(f + ": cannot extend with " + type_name(val));
        for (const auto& e : val.items()) cur->items().push_back(e);
      }
    }
  }
  return d;
}

value f_set_dict_key_value(interpreter&, const value& v, call_args& a) {
  return dictupdate(v, a, "set_dict_key_value");
}
value f_update_dict_key_value(interpreter&, const value& v, call_args& a) {
  return dictupdate(v, a, "update_dict_key_value");
}
value f_append_dict_key_value(interpreter&, const value& v, call_args& a) {
  return dictupdate(v, a, "append_dict_key_value");
}
value f_extend_dict_key_value(interpreter&, const value& v, call_args& a) {
  return dictupdate(v, a, "extend_dict_key_value");
}

// --- salt.utils.network (IPv4 and IPv6 through inet_pton) ---

struct ip_value {
  int version = 0;
  std::array<unsigned char, 16> bytes{};
  int prefix = -1;  // -1: an address, not an interface
};

std::optional<ip_value> parse_address(const std::string& s) {
  ip_value ip;
  if (s.find(':') != std::string::npos) {
    if (s.find('%') != std::string::npos) return std::nullopt;
    if (inet_pton(AF_INET6, s.c_str(), ip.bytes.data()) != 1) return std::nullopt;
    ip.version = 6;
    return ip;
  }
  // Python's ipaddress: four decimal octets, no leading zeros.
  auto parts = split_keys(s, ".");
  if (parts.size() != 4) return std::nullopt;
  for (std::size_t i = 0; i < 4; ++i) {
    const auto& p = parts[i];
    if (p.empty() || p.size() > 3 || (p.size() > 1 && p[0] == '0') ||
        !std::all_of(p.begin(), p.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return std::nullopt;
    }
    int n = std::stoi(p);
    if (n > 255) return std::nullopt;
    ip.bytes[i] = static_cast<unsigned char>(n);
  }
  ip.version = 4;
  return ip;
}

// ipaddress.ip_address, else ip_interface ("addr/prefix" or "addr/netmask").
std::optional<ip_value> parse_ip(const value& v) {
  if (!v.is_string()) return std::nullopt;
  const std::string& s = v.as_string();
  auto slash = s.find('/');
  if (slash == std::string::npos) return parse_address(s);
  auto ip = parse_address(s.substr(0, slash));
  if (!ip) return std::nullopt;
  std::string pfx = s.substr(slash + 1);
  int max = ip->version == 4 ? 32 : 128;
  if (!pfx.empty() && pfx.size() <= 3 &&
      std::all_of(pfx.begin(), pfx.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    int n = std::stoi(pfx);
    if (n > max) return std::nullopt;
    ip->prefix = n;
    return ip;
  }
  if (ip->version == 4) {
    auto mask = parse_address(pfx);
    if (!mask || mask->version != 4) return std::nullopt;
    std::uint32_t m = (std::uint32_t{mask->bytes[0]} << 24) | (mask->bytes[1] << 16) |
                      (mask->bytes[2] << 8) | mask->bytes[3];
    int ones = 0;
    while (ones < 32 && (m & (0x80000000u >> ones))) ++ones;
    std::uint32_t expect = ones == 0 ? 0 : ~std::uint32_t{0} << (32 - ones);
    if (m == expect) {
      ip->prefix = ones;
      return ip;
    }
    // A host mask (0.0.0.255) is accepted too.
    std::uint32_t inv = ~m;
    int host_ones = 0;
    while (host_ones < 32 && (inv & (0x80000000u >> host_ones))) ++host_ones;
    std::uint32_t expect_inv = host_ones == 0 ? 0 : ~std::uint32_t{0} << (32 - host_ones);
    if (inv == expect_inv) {
      ip->prefix = host_ones;
      return ip;
    }
  }
  return std::nullopt;
}

std::string address_text(const ip_value& ip) {
  char buf[64];
  if (ip.version == 4) {
    std::snprintf(buf, sizeof buf, "%u.%u.%u.%u", ip.bytes[0], ip.bytes[1], ip.bytes[2],
                  ip.bytes[3]);
    return buf;
  }
  // Python's compressed form: the longest run (first on a tie) of two or
  // more zero groups becomes "::", hex in lower case, no dotted quad.
  std::array<unsigned, 8> g{};
  for (int i = 0; i < 8; ++i) g[i] = (ip.bytes[2 * i] << 8) | ip.bytes[2 * i + 1];
  int best = -1, best_len = 0;
  for (int i = 0; i < 8;) {
    if (g[i] != 0) {
      ++i;
      continue;
    }
    int j = i;
    while (j < 8 && g[j] == 0) ++j;
    if (j - i > best_len && j - i > 1) {
      best = i;
      best_len = j - i;
    }
    i = j;
  }
  std::string out;
  for (int i = 0; i < 8; ++i) {
    if (i == best) {
      out += "::";
      i += best_len - 1;
      continue;
    }
    if (!out.empty() && out.back() != ':') out += ':';
    std::snprintf(buf, sizeof buf, "%x", g[i]);
    out += buf;
  }
  return out;
}

std::string ip_text(const ip_value& ip) {
  std::string s = address_text(ip);
  if (ip.prefix >= 0) s += "/" + std::to_string(ip.prefix);
  return s;
}

bool in_net(const ip_value& ip, const char* net) {
  auto n = parse_ip(value(net));
  if (!n || n->version != ip.version) return false;
  int bits = n->prefix;
  for (int i = 0; i < bits; ++i) {
    int byte = i / 8, bit = 7 - i % 8;
    if (((ip.bytes[byte] >> bit) & 1) != ((n->bytes[byte] >> bit) & 1)) return false;
  }
  return true;
}

bool any_net(const ip_value& ip, std::initializer_list<const char*> nets) {
  return std::any_of(nets.begin(), nets.end(), [&](const char* n) { return in_net(ip, n); });
}

// ipaddress's is_private as the CPython security releases of 2024 define
// it (3.10.15+, 3.11.10+, 3.12.4+): IANA's special-purpose registries
// with their exceptions, and an IPv4-mapped IPv6 address judged by its
// IPv4 address.
bool is_private(const ip_value& ip) {
  if (ip.version == 4) {
    return any_net(ip, {"0.0.0.0/8", "10.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
                        "192.0.0.0/24", "192.0.0.170/31", "192.0.2.0/24", "192.168.0.0/16",
                        "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "240.0.0.0/4",
                        "255.255.255.255/32"}) &&
           !any_net(ip, {"192.0.0.9/32", "192.0.0.10/32"});
  }
  if (in_net(ip, "::ffff:0:0/96")) {
    ip_value v4;
    v4.version = 4;
    std::copy(ip.bytes.begin() + 12, ip.bytes.end(), v4.bytes.begin());
    return is_private(v4);
  }
  return any_net(ip, {"::1/128", "::/128", "64:ff9b:1::/48", "100::/64", "2001::/23",
                      "2001:db8::/32", "2002::/16", "fc00::/7", "fe80::/10"}) &&
         !any_net(ip, {"2001:1::1/128", "2001:1::2/128", "2001:3::/32", "2001:4:112::/48",
                       "2001:20::/28", "2001:30::/28"});
}

bool ip_option(const ip_value& ip, const std::string& option) {
  bool v4 = ip.version == 4;
  if (option == "global" || option == "public") return !is_private(ip);
  if (option == "private") return is_private(ip);
  if (option == "loopback" || option == "lo") return any_net(ip, {"127.0.0.0/8", "::1/128"});
  if (option == "multicast") return any_net(ip, {"224.0.0.0/4", "ff00::/8"});
  if (option == "link-local" || option == "linklocal" || option == "ll" || option == "link_local") {
    return any_net(ip, {"169.254.0.0/16", "fe80::/10"});
  }
  if (option == "reserved") {
    return v4 ? any_net(ip, {"240.0.0.0/4"})
              : any_net(ip, {"::/8", "100::/8", "200::/7", "400::/6", "800::/5", "1000::/4",
                             "4000::/3", "6000::/3", "8000::/3", "a000::/3", "c000::/3", "e000::/4",
                             "f000::/5", "f800::/6", "fe00::/9"});
  }
  if (option == "site-local" || option == "sl" || option == "site_local") {
    return !v4 && any_net(ip, {"fec0::/10"});
  }
  if (option == "unspecified") return any_net(ip, {"0.0.0.0/32", "::/128"});
  return true;
}

// salt.utils.network._is_ipv: the address's text when it has `version` and
// passes every option, else None.
std::optional<std::string> is_ipv(const value& v, int version, const value& options) {
  auto ip = parse_ip(v);
  if (!ip || ip->version != version) return std::nullopt;
  if (!options.is_none() && !options.is_undefined() && options.truthy()) {
    for (const auto& o : split_keys(options.str(), ",")) {
      std::string t = o;
      t.erase(0, t.find_first_not_of(" \t"));
      t.erase(t.find_last_not_of(" \t") + 1);
      if (!ip_option(*ip, t)) return std::nullopt;
    }
  }
  return ip_text(*ip);
}

value ipv_filter(const value& v, int version, const value& options) {
  if (v.is_string()) {
    auto r = is_ipv(v, version, options);
    return r ? value(*r) : value(nullptr);
  }
  if (v.is_sequence_like()) {
    std::vector<value> out;
    for (const auto& e : v.items())
      if (auto r = is_ipv(e, version, options)) out.emplace_back(*r);
    return value::make_list(std::move(out));
  }
  return nullptr;
}

value f_is_ipv4(interpreter&, const value& v, call_args& a) {
  return is_ipv(v, 4, argument(a, 0, "options", nullptr)).has_value();
}
value f_is_ipv6(interpreter&, const value& v, call_args& a) {
  return is_ipv(v, 6, argument(a, 0, "options", nullptr)).has_value();
}
value f_is_ip(interpreter&, const value& v, call_args& a) {
  value o = argument(a, 0, "options", nullptr);
  return is_ipv(v, 4, o).has_value() || is_ipv(v, 6, o).has_value();
}
value f_ipv4(interpreter&, const value& v, call_args& a) {
  return ipv_filter(v, 4, argument(a, 0, "options", nullptr));
}
value f_ipv6(interpreter&, const value& v, call_args& a) {
  return ipv_filter(v, 6, argument(a, 0, "options", nullptr));
}

value ipaddr(const value& v, const value& options) {
  value four = ipv_filter(v, 4, options);
  value six = ipv_filter(v, 6, options);
  if (four.is_none() || six.is_none()) return four.truthy() ? four : six;
  std::vector<value> out = four.items();
  out.insert(out.end(), six.items().begin(), six.items().end());
  return value::make_list(std::move(out));
}

value f_ipaddr(interpreter&, const value& v, call_args& a) {
  return ipaddr(v, argument(a, 0, "options", nullptr));
}

// _filter_ipaddr: the matching addresses as a list, or nullopt.
std::optional<std::vector<value>> filter_ipaddr(const value& v, call_args& a) {
  value options = argument(a, 0, "options", nullptr);
  value version = argument(a, 1, "version", nullptr);
  value out;
  if (!version.is_none() && version.truthy()) {
    std::int64_t n = to_int(version, "version");
    out = n == 4 ? ipv_filter(v, 4, options) : n == 6 ? ipv_filter(v, 6, options) : value(nullptr);
  } else {
    out = ipaddr(v, options);
  }
  if (!out.truthy()) return std::nullopt;
  if (!out.is_sequence_like()) return std::vector<value>{out};
  return out.items();
}

value f_ip_host(interpreter&, const value& v, call_args& a) {
  auto ips = filter_ipaddr(v, a);
  if (!ips) return nullptr;
  auto host = [](const value& x) {
    auto ip = parse_ip(x);
    if (ip->prefix < 0) ip->prefix = ip->version == 4 ? 32 : 128;
    return value(ip_text(*ip));
  };
  if (!v.is_sequence_like()) return host((*ips)[0]);
  std::vector<value> out;
  for (const auto& e : *ips) out.push_back(host(e));
  return value::make_list(std::move(out));
}

// The network an address or interface lies in (strict=False).
ip_value network_of(const value& x) {
  auto ip = parse_ip(x);
  int bits = ip->version == 4 ? 32 : 128;
  if (ip->prefix < 0) ip->prefix = bits;
  for (int i = ip->prefix; i < bits; ++i)
    ip->bytes[i / 8] &= static_cast<unsigned char>(~(1 << (7 - i % 8)));
  return *ip;
}

value network_size(const value& x) {
  ip_value n = network_of(x);
  int host_bits = (n.version == 4 ? 32 : 128) - n.prefix;
  if (host_bits > 62)
    throw template_error("network_size: the network has more than 2**62 addresses");
  return std::int64_t{1} << host_bits;
}

value network_hosts(const value& x) {
  ip_value n = network_of(x);
  int bits = n.version == 4 ? 32 : 128;
  int host_bits = bits - n.prefix;
  if (host_bits > 16) throw template_error("network_hosts: more than 65536 hosts");
  std::uint64_t count = std::uint64_t{1} << host_bits;
  std::vector<value> out;
  // Python's hosts(): all but network and broadcast for IPv4 (except /31
  // and /32); all but the subnet-router anycast address for IPv6 (except
  // /127 and /128).
  std::uint64_t first = 0, last = count;
  if (n.version == 4 && host_bits >= 2) {
    first = 1;
    last = count - 1;
  } else if (n.version == 6 && host_bits >= 2) {
    first = 1;
  }
  for (std::uint64_t i = first; i < last; ++i) {
    ip_value h = n;
    h.prefix = -1;
    std::uint64_t carry = i;
    for (int b = bits / 8 - 1; b >= 0 && carry; --b) {
      std::uint64_t sum = h.bytes[b] + (carry & 0xff);
      h.bytes[b] = static_cast<unsigned char>(sum & 0xff);
      carry = (carry >> 8) + (sum >> 8);
    }
    out.emplace_back(address_text(h));
  }
  return value::make_list(std::move(out));
}

value f_network_size(interpreter&, const value& v, call_args& a) {
  auto ips = filter_ipaddr(v, a);
  if (!ips) return nullptr;
  if (!v.is_sequence_like()) return network_size((*ips)[0]);
  std::vector<value> out;
  for (const auto& e : *ips) out.push_back(network_size(e));
  return value::make_list(std::move(out));
}

value f_network_hosts(interpreter&, const value& v, call_args& a) {
  auto ips = filter_ipaddr(v, a);
  if (!ips) return nullptr;
  if (!v.is_sequence_like()) return network_hosts((*ips)[0]);
  std::vector<value> out;
  for (const auto& e : *ips) out.push_back(network_hosts(e));
  return value::make_list(std::move(out));
}

// ipwrap: an IPv6 address (or interface, which ip_bracket then refuses as
// Salt's ipaddress.ip_address does) in brackets, written as Python writes it.
value f_ipwrap(interpreter&, const value& v, call_args&) {
  auto wrap = [](const value& x) {
    if (!is_ipv(x, 6, nullptr)) return x;
    std::string s = x.as_string();
    auto ip = parse_address(s);
    if (!ip)
      throw template_error(string_repr(s) + " does not appear to be an IPv4 or IPv6 address");
    return value("[" + address_text(*ip) + "]");
  };
  if (v.is_sequence_like()) {
    std::vector<value> out;
    for (const auto& e : v.items()) out.push_back(wrap(e));
    return value::make_list(std::move(out));
  }
  return wrap(v);
}

// ipaddress.ip_network(net) (strict: no host bits set).
ip_value strict_network(const value& net) {
  auto n = parse_ip(net);
  if (!n) {
    throw template_error(net.repr() + " does not appear to be an IPv4 or IPv6 network");
  }
  int bits = n->version == 4 ? 32 : 128;
  if (n->prefix < 0) n->prefix = bits;
  for (int i = n->prefix; i < bits; ++i) {
    if (n->bytes[i / 8] & (1 << (7 - i % 8)))
      throw template_error(net.str() + " has host bits set");
  }
  return *n;
}

bool network_contains(const ip_value& net, const ip_value& ip) {
  if (net.version != ip.version) return false;
  for (int i = 0; i < net.prefix; ++i) {
    int bit = 7 - i % 8;
    if (((ip.bytes[i / 8] >> bit) & 1) != ((net.bytes[i / 8] >> bit) & 1)) return false;
  }
  return true;
}

value f_filter_by_networks(interpreter&, const value& v, call_args& a) {
  value networks = argument(a, 0, "networks");
  if (networks.is_none()) return v;
  std::vector<ip_value> nets;
  for (const auto& n : iterate(networks)) nets.push_back(strict_network(n));
  auto filter = [&](const value& ips) {
    std::vector<value> out;
    for (const auto& ip : iterate(ips)) {
      auto addr = ip.is_string() ? parse_address(ip.as_string()) : std::nullopt;
      if (!addr) {
        throw template_error(ip.repr() + " does not appear to be an IPv4 or IPv6 address");
      }
      for (const auto& n : nets)
        if (network_contains(n, *addr)) out.push_back(ip);
    }
    return value::make_list(std::move(out));
  };
  v.defined();
  if (v.is_dict()) {
    value out = value::make_dict();
    for (const auto& [k, e] : v.dict().entries) out.dict().set(k, filter(e));
    return out;
  }
  if (v.is_sequence_like() || v.is_string()) return filter(v);
  throw template_error("Do not know how to filter a <class '" + type_name(v) + "'>");
}

// SerializerExtension.format_python: pprint.pformat(value).strip(), which
// brine writes for what fits on one line (as Jinja's pprint filter).
value f_python(interpreter&, const value& v, call_args&) {
  require_defined(v);
  std::string s = python_pformat(v);
  auto e = s.find_last_not_of(" \t\n\r\f\v");
  auto b = s.find_first_not_of(" \t\n\r\f\v");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// The first `n` code points of s, and the rest.
std::pair<std::string, std::string> cp_split(const std::string& s, std::size_t n) {
  std::size_t i = 0;
  while (i < s.size() && n > 0) {
    ++i;
    while (i < s.size() && (static_cast<unsigned char>(s[i]) & 0xc0) == 0x80) ++i;
    --n;
  }
  return {s.substr(0, i), s.substr(i)};
}

}  // namespace

std::vector<std::string> textwrap(const std::string& text, std::size_t width, bool break_long_words,
                                  bool break_on_hyphens) {
  // TextWrapper.wordsep_re (or wordsep_simple_re), split as re.split does.
  static const std::string k_ws = "[\\t\\n\\x0b\\x0c\\r ]";
  static const std::string k_nws = "[^\\t\\n\\x0b\\x0c\\r ]";
  static const std::string k_wp = "[\\w!\"'&.,?]";
  static const std::string k_lt = "[^\\d\\W]";
  static const std::string k_hyphenated = "(" + k_ws + "+|(?<=" + k_wp + ")-{2,}(?=\\w)|" + k_nws +
                                          "+?(?:-(?:(?<=" + k_lt + "{2}-)|(?<=" + k_lt + "-" +
                                          k_lt + "-))(?=" + k_lt + "-?" + k_lt + ")|(?=" + k_ws +
                                          "|\\z)|(?<=" + k_wp + ")(?=-{2,}\\w)))";
  static const std::string k_simple = "(" + k_ws + "+)";
  regex re(break_on_hyphens ? k_hyphenated : k_simple, false, false);
  std::vector<std::string> chunks;
  std::size_t at = 0;
  while (at < text.size() && re.search(text, at)) {
    if (re.begin(0) > at) chunks.push_back(text.substr(at, re.begin(0) - at));
    chunks.push_back(text.substr(re.begin(0), re.end(0) - re.begin(0)));
    at = re.end(0);
  }
  if (at < text.size()) chunks.push_back(text.substr(at));
  auto blank = [](const std::string& c) {
    return c.find_first_not_of(" \t\n\r\f\v") == std::string::npos;
  };
  // TextWrapper._wrap_chunks with empty indents and drop_whitespace.
  std::reverse(chunks.begin(), chunks.end());
  std::vector<std::string> lines;
  while (!chunks.empty()) {
    std::vector<std::string> cur;
    std::size_t cur_len = 0;
    if (blank(chunks.back()) && !lines.empty()) chunks.pop_back();
    while (!chunks.empty() && cur_len + base::python_len(chunks.back()) <= width) {
      cur_len += base::python_len(chunks.back());
      cur.push_back(chunks.back());
      chunks.pop_back();
    }
    if (!chunks.empty() && base::python_len(chunks.back()) > width) {
      // _handle_long_word
      std::size_t space_left = width < 1 ? 1 : width - cur_len;
      if (break_long_words) {
        std::size_t end = space_left;
        const std::string& chunk = chunks.back();
        if (break_on_hyphens && base::python_len(chunk) > space_left) {
          std::string head = cp_split(chunk, space_left).first;
          auto hyphen = head.rfind('-');
          if (hyphen != std::string::npos && hyphen > 0 &&
              head.substr(0, hyphen).find_first_not_of('-') != std::string::npos) {
            end = base::python_len(head.substr(0, hyphen)) + 1;
          }
        }
        auto [first, rest] = cp_split(chunk, end);
        cur.push_back(first);
        chunks.back() = rest;
      } else if (cur.empty()) {
        cur.push_back(chunks.back());
        chunks.pop_back();
      }
    }
    if (!cur.empty() && blank(cur.back())) cur.pop_back();
    if (!cur.empty()) {
      std::string line;
      for (const auto& c : cur) line += c;
      lines.push_back(line);
    }
  }
  return lines;
}

namespace {

// --- pprint.pformat (width 80, indent 1, sort_dicts) ---

// A copy whose dicts are sorted by key, as pprint's _safe_repr shows them
// (keys that do not compare keep their order).
value sorted_copy(const value& v, int depth = 0) {
  if (depth > 200) throw template_error("pprint: data nested deeper than 200 levels");
  if (v.is_dict() && !v.is_namespace()) {
    auto e = v.dict().entries;
    try {
      std::stable_sort(e.begin(), e.end(),
                       [](const auto& p, const auto& q) { return less(p.first, q.first); });
    } catch (const template_error&) {
      e = v.dict().entries;
    }
    value d = value::make_dict();
    for (auto& [k, x] : e) d.dict().entries.emplace_back(k, sorted_copy(x, depth + 1));
    return d;
  }
  if (v.is_sequence_like() && v.list().repr_override.empty() && v.list().view.empty() &&
      v.list().fields.empty()) {
    std::vector<value> items;
    for (const auto& i : v.items()) items.push_back(sorted_copy(i, depth + 1));
    return v.is_tuple() ? value::make_tuple(std::move(items)) : value::make_list(std::move(items));
  }
  return v;
}

class pformatter {
 public:
  std::string run(const value& v) {
    format(v, 0, 0, 0);
    return std::move(out_);
  }

 private:
  static constexpr int k_width = 80;

  static int width_of(const std::string& s) { return static_cast<int>(base::python_len(s)); }

  void format(const value& v, int indent, int allowance, int level) {
    if (level > 200) throw template_error("pprint: data nested deeper than 200 levels");
    std::string rep = sorted_copy(v).repr();
    if (width_of(rep) > k_width - indent - allowance) {
      bool plain_seq = v.is_sequence_like() && v.list().repr_override.empty() &&
                       v.list().view.empty() && v.list().fields.empty();
      if (v.is_dict() && !v.is_namespace()) {
        out_ += '{';
        auto e = sorted_copy(v).dict().entries;
        format_dict_items(e, indent, allowance + 1, level + 1);
        out_ += '}';
        return;
      }
      if (plain_seq && v.is_list()) {
        out_ += '[';
        format_items(v.items(), indent, allowance + 1, level + 1);
        out_ += ']';
        return;
      }
      if (plain_seq && v.is_tuple()) {
        std::string end = v.items().size() == 1 ? ",)" : ")";
        out_ += '(';
        format_items(v.items(), indent, allowance + static_cast<int>(end.size()), level + 1);
        out_ += end;
        return;
      }
      if (v.is_string() && !v.as_string().empty()) {
        format_str(v.as_string(), indent, allowance, level + 1);
        return;
      }
    }
    out_ += rep;
  }

  void format_dict_items(const std::vector<std::pair<value, value>>& items, int indent,
                         int allowance, int level) {
    indent += 1;
    std::string delim = ",\n" + std::string(static_cast<std::size_t>(indent), ' ');
    for (std::size_t i = 0; i < items.size(); ++i) {
      bool last = i + 1 == items.size();
      std::string rep = sorted_copy(items[i].first).repr();
      out_ += rep + ": ";
      format(items[i].second, indent + width_of(rep) + 2, last ? allowance : 1, level);
      if (!last) out_ += delim;
    }
  }

  void format_items(const std::vector<value>& items, int indent, int allowance, int level) {
    indent += 1;
    std::string delim = ",\n" + std::string(static_cast<std::size_t>(indent), ' ');
    for (std::size_t i = 0; i < items.size(); ++i) {
      bool last = i + 1 == items.size();
      if (i) out_ += delim;
      format(items[i], indent, last ? allowance : 1, level);
    }
  }

  // str.splitlines(keepends=True) for the ASCII line boundaries.
  static std::vector<std::string> split_lines(const std::string& s) {
    std::vector<std::string> out;
    std::size_t start = 0;
    for (std::size_t i = 0; i < s.size(); ++i) {
      char c = s[i];
      if (c == '\n' || c == '\r' || c == '\v' || c == '\f' || c == '\x1c' || c == '\x1d' ||
          c == '\x1e') {
        if (c == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
        out.push_back(s.substr(start, i + 1 - start));
        start = i + 1;
      }
    }
    if (start < s.size()) out.push_back(s.substr(start));
    return out;
  }

  static std::string repr_of(const std::string& s) { return value(s).repr(); }

  // PrettyPrinter._pprint_str: a long string as adjacent literals split
  // after whitespace, in parentheses at the top level.
  void format_str(const std::string& s, int indent, int allowance, int level) {
    std::vector<std::string> chunks;
    auto lines = split_lines(s);
    if (level == 1) {
      indent += 1;
      allowance += 1;
    }
    int max_width = k_width - indent;
    int max_width1 = max_width;
    std::string rep;
    for (std::size_t i = 0; i < lines.size(); ++i) {
      const std::string& line = lines[i];
      rep = repr_of(line);
      if (i + 1 == lines.size()) max_width1 -= allowance;
      if (width_of(rep) <= max_width1) {
        chunks.push_back(rep);
        continue;
      }
      // re.findall(r'\S*\s*', line) without the final empty match.
      std::vector<std::string> parts;
      auto space = [](char c) {
        return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f');
      };
      std::size_t p = 0;
      while (p < line.size()) {
        std::size_t q = p;
        while (q < line.size() && !space(line[q])) ++q;
        while (q < line.size() && space(line[q])) ++q;
        parts.push_back(line.substr(p, q - p));
        p = q;
      }
      int max_width2 = max_width;
      std::string current;
      for (std::size_t j = 0; j < parts.size(); ++j) {
        std::string candidate = current + parts[j];
        if (j + 1 == parts.size() && i + 1 == lines.size()) max_width2 -= allowance;
        if (width_of(repr_of(candidate)) > max_width2) {
          if (!current.empty()) chunks.push_back(repr_of(current));
          current = parts[j];
        } else {
          current = candidate;
        }
      }
      if (!current.empty()) chunks.push_back(repr_of(current));
    }
    if (chunks.size() == 1) {
      out_ += rep;
      return;
    }
    if (level == 1) out_ += '(';
    for (std::size_t i = 0; i < chunks.size(); ++i) {
      if (i) out_ += "\n" + std::string(static_cast<std::size_t>(indent), ' ');
      out_ += chunks[i];
    }
    if (level == 1) out_ += ')';
  }

  std::string out_;
};

}  // namespace

std::string python_pformat(const value& v) {
  v.defined();
  return pformatter().run(v);
}

namespace {

// salt.utils.data.mysql_to_dict: MySQL's table output, as a list of lines,
// to a dict of rows keyed by the column `key` (values through to_num).
value f_mysql_to_dict(interpreter& in, const value& v, call_args& a) {
  value key = argument(a, 0, "key");
  value ret = value::make_dict();
  std::vector<std::string> headers{""};
  for (const auto& line_v : iterate(v)) {
    if (!line_v.truthy()) continue;
    if (!line_v.is_string()) throw template_error("mysql_to_dict: expected lines of text");
    const std::string& line = line_v.as_string();
    if (line.starts_with("+")) continue;
    std::vector<std::string> comps = split_keys(line, "|");
    for (auto& c : comps) {
      c.erase(0, c.find_first_not_of(" \t\n\r\f\v"));
      auto e = c.find_last_not_of(" \t\n\r\f\v");
      c.erase(e == std::string::npos ? 0 : e + 1);
    }
    if (headers.size() > 1) {
      value row = value::make_dict();
      for (std::size_t field = 1; field + 1 < headers.size(); ++field) {
        if (field >= comps.size()) throw template_error("mysql_to_dict: list index out of range");
        call_args none;
        row.dict().set(value(headers[field]), f_to_num(in, value(comps[field]), none));
      }
      value* k = row.dict().find(key);
      if (!k) throw template_error("mysql_to_dict: " + key.repr());
      ret.dict().set(*k, row);
    } else {
      headers = comps;
    }
  }
  return ret;
}

// --- not supported: nondeterministic, or they read the host ---

#define BRINE_UNSUPPORTED(fn, name, why) \
  value fn(interpreter&, const value&, call_args&) { unsupported(name, why); }

BRINE_UNSUPPORTED(f_random_hash, "random_hash", "its value is random (nondeterministic)")
BRINE_UNSUPPORTED(f_rand_str, "rand_str", "its value is random (nondeterministic)")
BRINE_UNSUPPORTED(f_random_str, "random_str", "its value is random (nondeterministic)")
// random_sample and random_shuffle without a seed are random in Salt too;
// with one, Salt's answer is Python's random.Random(seed) sequence, which
// brine does not reproduce, so a seed is refused rather than answered
// differently.
std::mt19937_64& template_rng() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return rng;
}

std::mt19937_64& unseeded_rng(const char* name, const value& seed) {
  if (!seed.is_none())
    unsupported(name, "with a seed its answer is Python's random.Random(seed) sequence, "
                      "which brine does not reproduce; leave the seed out");
  return template_rng();
}

value f_random_sample(interpreter&, const value& v, call_args& a) {
  value size = argument(a, 0, "samplesize");
  auto& rng = unseeded_rng("random_sample", argument(a, 1, "seed", nullptr));
  auto items = iterate(v);
  if (!size.is_int() || size.as_int() < 0 || static_cast<std::size_t>(size.as_int()) > items.size())
    throw template_error("Sample larger than population or is negative");
  std::vector<value> out;
  std::sample(items.begin(), items.end(), std::back_inserter(out), size.as_int(), rng);
  std::shuffle(out.begin(), out.end(), rng);
  return value::make_list(std::move(out));
}

value f_random_shuffle(interpreter&, const value& v, call_args& a) {
  auto& rng = unseeded_rng("random_shuffle", argument(a, 0, "seed", nullptr));
  auto items = iterate(v);
  std::shuffle(items.begin(), items.end(), rng);
  return value::make_list(std::move(items));
}

BRINE_UNSUPPORTED(f_gen_mac, "gen_mac", "its value is random (nondeterministic)")
BRINE_UNSUPPORTED(f_dns_check, "dns_check", "host lookups are not supported in templates")
BRINE_UNSUPPORTED(f_which, "which", "it reads the minion's PATH; use salt['cmd.which']")
BRINE_UNSUPPORTED(f_file_hashsum, "file_hashsum",
                  "it reads the minion's files; use salt['file.get_hash']")
BRINE_UNSUPPORTED(f_is_empty, "is_empty", "it reads the minion's files")
BRINE_UNSUPPORTED(f_is_text_file, "is_text_file", "it reads the minion's files")
BRINE_UNSUPPORTED(f_is_bin_file, "is_bin_file", "it reads the minion's files")
BRINE_UNSUPPORTED(f_list_files, "list_files", "it reads the minion's files")
BRINE_UNSUPPORTED(f_http_query, "http_query", "templates make no HTTP requests")
BRINE_UNSUPPORTED(f_get_uid, "get_uid", "it reads the minion's user database")
BRINE_UNSUPPORTED(f_json_query, "json_query", "JMESPath is not implemented yet")
BRINE_UNSUPPORTED(f_json_encode, "json_encode_dict/json_encode_list",
                  "they make bytes, and brine templates have no bytes type")
BRINE_UNSUPPORTED(f_to_bytes, "to_bytes", "brine templates have no bytes type")
BRINE_UNSUPPORTED(f_mac_str_to_bytes, "mac_str_to_bytes", "brine templates have no bytes type")
BRINE_UNSUPPORTED(f_xml, "xml", "not implemented yet")

#undef BRINE_UNSUPPORTED

// salt.utils.dateutils.strftime without timelib (Salt's onedir has none):
// a number, or a string of one, is a POSIX timestamp shown in the local
// time zone (datetime.fromtimestamp); other strings fail as in Salt.
value f_strftime(interpreter&, const value& v, call_args& a) {
  std::string format = argument(a, 0, "format", "%Y-%m-%d").str();
  v.defined();
  if (v.is_none())
    unsupported("strftime", "without a date it formats the current time (nondeterministic)");
  double stamp = 0;
  if (v.is_int() || v.is_bool()) {
    stamp = static_cast<double>(v.is_bool() ? v.as_bool() : v.as_int());
  } else if (v.is_float()) {
    stamp = v.as_float();
  } else if (v.is_string()) {
    const std::string& t = v.as_string();
    char* end = nullptr;
    stamp = std::strtod(t.c_str(), &end);
    if (t.empty() || *end != '\0' || t.find_first_of("xXpPnN") != std::string::npos) {
      throw template_error("Unable to parse " + t + ". Consider installing timelib");
    }
  } else {
    throw template_error("Unable to parse " + v.str() + ". Consider installing timelib");
  }
  if (!std::isfinite(stamp) || std::fabs(stamp) > 1e11) {
    throw template_error("year is out of range");
  }
  auto secs = static_cast<std::time_t>(std::floor(stamp));
  auto micros = static_cast<long>(std::llround((stamp - std::floor(stamp)) * 1e6));
  if (micros >= 1000000) {
    ++secs;
    micros -= 1000000;
  }
  std::tm tm{};
  localtime_r(&secs, &tm);
  // Python adds %f (microseconds); C's strftime does not know it.
  std::string fmt;
  for (std::size_t i = 0; i < format.size(); ++i) {
    if (format[i] == '%' && i + 1 < format.size()) {
      if (format[i + 1] == 'f') {
        char buf[24];
        std::snprintf(buf, sizeof buf, "%06ld", micros);
        fmt += buf;
      } else {
        fmt += format.substr(i, 2);
      }
      ++i;
    } else {
      fmt += format[i];
    }
  }
  if (fmt.empty()) return "";
  std::vector<char> buf(fmt.size() * 8 + 256);
  std::size_t n = std::strftime(buf.data(), buf.size(), fmt.c_str(), &tm);
  return std::string(buf.data(), n);
}

value f_human_to_bytes(interpreter&, const value& v, call_args& a) {
  std::string default_unit = argument(a, 0, "default_unit", "B").str();
  bool metric = argument(a, 1, "handle_metric", false).truthy();
  std::string s = v.defined().str();
  s.erase(0, s.find_first_not_of(" \t\n\r\f\v"));
  s.erase(s.find_last_not_of(" \t\n\r\f\v") + 1);
  std::size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  std::string number = s.substr(0, i);
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  std::string unit = s.substr(i);
  // Salt's re.match(r"(?P<value>[0-9.]*)\s*(?P<unit>.*)$") fails on a line
  // break in the unit, and Salt then calls .group on None.
  if (unit.find('\n') != std::string::npos) {
    throw template_error("human_to_bytes: 'NoneType' object has no attribute 'group'");
  }
  auto lower = [](std::string x) {
    for (auto& c : x) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return x;
  };
  unit = lower(unit.empty() ? default_unit : unit);
  double amount = 0;
  bool integral = !number.empty() && number.find('.') == std::string::npos;
  if (integral) {
    amount = std::stod(number);
  } else {
    char* end = nullptr;
    amount = std::strtod(number.c_str(), &end);
    if (number.empty() || *end != '\0' || number == ".") return 0;
  }
  static const std::string k_prefixes = "bkmgtpezy";
  bool dec = false;
  if (unit.size() == 2 && unit[1] == 'b' && k_prefixes.find(unit[0]) != std::string::npos &&
      unit[0] != 'b') {
    dec = metric;
  } else if (!(unit == "b" || (unit.size() == 1 && k_prefixes.find(unit[0]) != std::string::npos) ||
               (unit.size() == 3 && unit.substr(1) == "ib" &&
                k_prefixes.find(unit[0]) != std::string::npos && unit[0] != 'b'))) {
    return 0;
  }
  auto p = static_cast<int>(k_prefixes.find(unit[0]));
  double result = amount * (dec ? std::pow(10.0, p * 3) : std::pow(2.0, p * 10));
  if (result >= 9.2e18) throw template_error("human_to_bytes: the size does not fit in 64 bits");
  return static_cast<std::int64_t>(result);
}

// SerializerExtension.dict_to_sls_yaml_params: each key/value pair as a
// one-key dict in a list, through the yaml filter (flow_style=False).
value f_dict_to_sls_yaml_params(interpreter& in, const value& v, call_args& a) {
  require_defined(v);
  if (!v.is_dict()) throw template_error("'" + type_name(v) + "' object has no attribute 'items'");
  std::vector<value> items;
  for (const auto& [k, e] : v.dict().entries) {
    value d = value::make_dict();
    d.dict().set(k, e);
    items.push_back(d);
  }
  call_args b;
  b.positional.push_back(argument(a, 0, "flow_style", false));
  return f_yaml(in, value::make_list(std::move(items)), b);
}

value g_raise(call_args& a) {
  throw template_error(a.positional.empty() ? std::string() : a.positional[0].str());
}

// collections.OrderedDict.
value g_odict(call_args& a) {
  value d = value::make_dict();
  d.dict().ordered_dict = true;
  if (!a.positional.empty()) {
    const value& src = a.positional[0].defined();
    if (src.is_dict()) {
      d.dict().entries = src.dict().entries;
    } else {
      for (const auto& p : iterate(src)) {
        auto kv = iterate(p);
        if (kv.size() != 2)
          throw template_error("dictionary update sequence element has wrong length");
        d.dict().set(kv[0], kv[1]);
      }
    }
  }
  for (auto& [k, v] : a.keyword) d.dict().set(value(k), v);
  return d;
}

}  // namespace

value jinja_random(interpreter&, const value& v, call_args&) {
  auto items = iterate(v);
  if (items.empty()) return value::undefined("No random item, sequence was empty.");
  return items[std::uniform_int_distribution<std::size_t>(0, items.size() - 1)(template_rng())];
}

const std::map<std::string, filter_fn>& salt_filters() {
  static const fmap filters = {
      {"append_dict_key_value", f_append_dict_key_value},
      {"avg", f_avg},
      {"base64_decode", f_base64_decode},
      {"base64_encode", f_base64_encode},
      {"check_whitelist_blacklist", f_check_whitelist_blacklist},
      {"combinations", f_combinations},
      {"combinations_with_replacement", f_combinations_with_replacement},
      {"compare_dicts", f_compare_dicts},
      {"compare_lists", f_compare_lists},
      {"compress", f_compress},
      {"contains_whitespace", f_contains_whitespace},
      {"date_format", f_strftime},
      {"dict_to_sls_yaml_params", f_dict_to_sls_yaml_params},
      {"difference", f_difference},
      {"dns_check", f_dns_check},
      {"exactly_n_true", f_exactly_n_true},
      {"exactly_one_true", f_exactly_one_true},
      {"extend_dict_key_value", f_extend_dict_key_value},
      {"file_hashsum", f_file_hashsum},
      {"filter_by_networks", f_filter_by_networks},
      {"flatten", f_flatten},
      {"gen_mac", f_gen_mac},
      {"get_uid", f_get_uid},
      {"hmac", f_hmac},
      {"hmac_compute", f_hmac_compute},
      {"http_query", f_http_query},
      {"human_to_bytes", f_human_to_bytes},
      {"intersect", f_intersect},
      {"ip_host", f_ip_host},
      {"ipaddr", f_ipaddr},
      {"ipv4", f_ipv4},
      {"ipv6", f_ipv6},
      {"ipwrap", f_ipwrap},
      {"is_bin_file", f_is_bin_file},
      {"is_empty", f_is_empty},
      {"is_hex", f_is_hex},
      {"is_ip", f_is_ip},
      {"is_ipv4", f_is_ipv4},
      {"is_ipv6", f_is_ipv6},
      {"is_iter", f_is_iter},
      {"is_list", f_is_list},
      {"is_text_file", f_is_text_file},
      {"json", f_json},
      {"json_decode_dict", f_identity},
      {"json_decode_list", f_identity},
      {"json_encode_dict", f_json_encode},
      {"json_encode_list", f_json_encode},
      {"json_query", f_json_query},
      {"list_files", f_list_files},
      {"load_json", f_load_json},
      {"load_text", f_load_text},
      {"load_yaml", f_load_yaml},
      {"mac_str_to_bytes", f_mac_str_to_bytes},
      {"md5", f_md5},
      {"method_call", f_method_call},
      {"mysql_to_dict", f_mysql_to_dict},
      {"network_hosts", f_network_hosts},
      {"network_size", f_network_size},
      {"path_join", f_path_join},
      {"permutations", f_permutations},
      {"product", f_product},
      {"python", f_python},
      {"quote", f_quote},
      {"rand_str", f_rand_str},
      {"random_hash", f_random_hash},
      {"random_sample", f_random_sample},
      {"random_shuffle", f_random_shuffle},
      {"random_str", f_random_str},
      {"regex_escape", f_regex_escape},
      {"regex_match", f_regex_match},
      {"regex_replace", f_regex_replace},
      {"regex_search", f_regex_search},
      {"sequence", f_sequence},
      {"set_dict_key_value", f_set_dict_key_value},
      {"sha1", f_sha1},
      {"sha256", f_sha256},
      {"sha512", f_sha512},
      {"skip", f_skip},
      {"sorted_ignorecase", f_sorted_ignorecase},
      {"str_to_num", f_to_num},
      {"strftime", f_strftime},
      {"substring_in_list", f_substring_in_list},
      {"symmetric_difference", f_symmetric_difference},
      {"to_bool", f_to_bool},
      {"to_bytes", f_to_bytes},
      {"to_camelcase", f_to_camelcase},
      {"to_num", f_to_num},
      {"to_snake_case", f_to_snake_case},
      {"traverse", f_traverse},
      {"union", f_union},
      {"update_dict_key_value", f_update_dict_key_value},
      {"uuid", f_uuid},
      {"which", f_which},
      {"xml", f_xml},
      {"yaml", f_yaml},
      {"yaml_dquote", f_yaml_dquote},
      {"yaml_encode", f_yaml_encode},
      {"yaml_squote", f_yaml_squote},
      {"zip", f_zip},
      {"zip_longest", f_zip_longest},
  };
  return filters;
}

const std::map<std::string, test_fn>& salt_tests() {
  static const tmap tests = {
      {"equalto", t_equalto},
      {"list", t_list},
      {"match", t_match},
  };
  return tests;
}

value salt_global(const std::string& name) {
  if (name == "raise") return value::make_callable("raise", g_raise);
  if (name == "odict") return value::make_callable("odict", g_odict);
  if (name == "ifelse" || name == "show_full_context") {
    return value::make_callable(name, [name](call_args&) -> value {
      throw template_error("'" + name + "' is not supported by brine yet");
    });
  }
  return value::undefined("'" + name + "' is undefined");
}

}  // namespace brine::render::detail

namespace brine::render {

void mark_ordered_dicts(const value& v) {
  if (v.is_dict()) {
    v.dict().ordered_dict = true;
    for (const auto& [k, e] : v.dict().entries) mark_ordered_dicts(e);
  } else if (v.is_sequence_like()) {
    for (const auto& e : v.items()) mark_ordered_dicts(e);
  }
}

void use_salt_dialect(environment& env) {
  env.filters.emplace("tojson", detail::salt_tojson);
  env.filters.emplace("unique", detail::salt_unique);
  env.filters.emplace("min", detail::salt_min);
  env.filters.emplace("max", detail::salt_max);
  if (!env.yaml_loader)
    env.yaml_loader = [](std::string_view text, const std::string& name) {
      return load_yaml<nlohmann::ordered_json>(text, name);
    };
}

}  // namespace brine::render
