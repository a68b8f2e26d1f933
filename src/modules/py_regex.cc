#include "modules/py_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cctype>
#include <vector>

#include "base/error.h"

namespace brine::modules {

std::string re_escape(std::string_view s) {
  static constexpr std::string_view special = "()[]{}?*+-|^$\\.&~# \t\n\r\v\f";
  std::string out;
  for (char ch : s) {
    if (special.find(ch) != std::string_view::npos) out += '\\';
    out += ch;
  }
  return out;
}

long long re_flags(const nlohmann::ordered_json& v) {
  if (v.is_number_integer()) return v.get<long long>();
  std::vector<std::string> names;
  if (v.is_string()) {
    names.push_back(v.get<std::string>());
  } else if (v.is_array()) {
    for (const auto& item : v) names.push_back((item.is_string() ? item.get<std::string>() : item.dump()));
  } else {
    throw base::error("Invalid re flags: \"" + (v.is_string() ? v.get<std::string>() : v.dump()) +
                      "\", must be given either as a single flag string, a list of strings, as "
                      "an integer, or as an re flag");
  }
  static const std::vector<std::pair<std::string, long long>> known = {
      {"T", 1},      {"TEMPLATE", 1}, {"I", 2},         {"IGNORECASE", 2}, {"L", 4},
      {"LOCALE", 4}, {"M", 8},        {"MULTILINE", 8}, {"S", 16},         {"DOTALL", 16},
      {"U", 32},     {"UNICODE", 32}, {"X", 64},        {"VERBOSE", 64},   {"DEBUG", 128},
      {"A", 256},    {"ASCII", 256}};
  long long out = 0;
  for (const std::string& name : names) {
    std::string n = name;
    for (char& ch : n) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    auto it = std::find_if(known.begin(), known.end(), [&](const auto& k) { return k.first == n; });
    if (it == known.end()) throw base::error("Invalid re flag given: " + name);
    out |= it->second;
  }
  return out;
}

struct py_regex::impl {
  pcre2_code* code = nullptr;
  pcre2_match_data* match = nullptr;
  int count = 0;
  ~impl() {
    pcre2_match_data_free(match);
    pcre2_code_free(code);
  }
};

namespace {

// Python's \Z (absolute end) is PCRE's \z; PCRE's \Z also matches before a
// final newline.
std::string translate(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size());
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '\\' && i + 1 < pattern.size()) {
      out += '\\';
      out += pattern[i + 1] == 'Z' ? 'z' : pattern[i + 1];
      ++i;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

}  // namespace

py_regex::py_regex(std::string_view pattern, long long flags) : impl_(std::make_unique<impl>()) {
  uint32_t opts = PCRE2_ALT_CIRCUMFLEX;
  if (flags & k_re_ignorecase) opts |= PCRE2_CASELESS;
  if (flags & k_re_multiline) opts |= PCRE2_MULTILINE;
  if (flags & k_re_dotall) opts |= PCRE2_DOTALL;
  if (flags & k_re_verbose) opts |= PCRE2_EXTENDED;
  std::unique_ptr<pcre2_compile_context, decltype(&pcre2_compile_context_free)> ctx(
      pcre2_compile_context_create(nullptr), &pcre2_compile_context_free);
  pcre2_set_newline(ctx.get(), PCRE2_NEWLINE_LF);
  std::string p = translate(pattern);
  int err = 0;
  PCRE2_SIZE at = 0;
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.data()), p.size(), opts, &err, &at,
                              ctx.get());
  if (impl_->code == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    throw base::error(reinterpret_cast<const char*>(msg) + std::string(" at position ") +
                      std::to_string(at) + ": '" + std::string(pattern) + "'");
  }
  impl_->match = pcre2_match_data_create_from_pattern(impl_->code, nullptr);
}

py_regex::~py_regex() = default;

bool py_regex::run(std::string_view subject, std::size_t start, uint32_t options) {
  int rc = pcre2_match(impl_->code, reinterpret_cast<PCRE2_SPTR>(subject.data()), subject.size(),
                       start, options, impl_->match, nullptr);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(rc, msg, sizeof msg);
    throw base::error(std::string("pattern match failed: ") + reinterpret_cast<const char*>(msg));
  }
  impl_->count = rc;
  return true;
}

bool py_regex::search(std::string_view subject, std::size_t start) {
  return run(subject, start, 0);
}

bool py_regex::match(std::string_view subject) { return run(subject, 0, PCRE2_ANCHORED); }

std::size_t py_regex::begin() const { return pcre2_get_ovector_pointer(impl_->match)[0]; }
std::size_t py_regex::end() const { return pcre2_get_ovector_pointer(impl_->match)[1]; }

std::optional<std::string> py_regex::group(std::string_view subject, int n) const {
  if (n < 0 || static_cast<uint32_t>(n) >= pcre2_get_ovector_count(impl_->match)) return std::nullopt;
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(impl_->match);
  if (ov[2 * n] == PCRE2_UNSET) return std::nullopt;
  return std::string(subject.substr(ov[2 * n], ov[2 * n + 1] - ov[2 * n]));
}

std::pair<std::string, long long> py_regex::subn(std::string_view repl, std::string_view subject,
                                                 long long count) {
  // The template: literal text and group numbers, in order.
  struct piece {
    std::string literal;
    int group = -1;
  };
  uint32_t groups = 0;
  pcre2_pattern_info(impl_->code, PCRE2_INFO_CAPTURECOUNT, &groups);
  std::vector<piece> tpl(1);
  auto is_octal = [](char ch) { return ch >= '0' && ch <= '7'; };
  auto is_digit = [](char ch) { return ch >= '0' && ch <= '9'; };
  auto add_group = [&](int g) {
    if (g < 0 || g > static_cast<int>(groups)) {
      throw base::error("invalid group reference " + std::to_string(g));
    }
    tpl.push_back({"", g});
    tpl.push_back({});
  };
  for (std::size_t i = 0; i < repl.size(); ++i) {
    char ch = repl[i];
    if (ch != '\\') {
      tpl.back().literal += ch;
      continue;
    }
    if (i + 1 >= repl.size()) throw base::error("bad escape (end of pattern)");
    char e = repl[++i];
    if (e == 'g') {
      auto close = repl.find('>', i);
      if (i + 1 >= repl.size() || repl[i + 1] != '<' || close == std::string_view::npos) {
        throw base::error("missing group name");
      }
      std::string name(repl.substr(i + 2, close - i - 2));
      if (!name.empty() && std::all_of(name.begin(), name.end(), is_digit)) {
        add_group(std::stoi(name));
      } else {
        int g = pcre2_substring_number_from_name(impl_->code,
                                                 reinterpret_cast<PCRE2_SPTR>(name.c_str()));
        if (g < 0) throw base::error("unknown group name '" + name + "'");
        add_group(g);
      }
      i = close;
    } else if (e == '0') {
      int value = 0;
      for (int k = 0; k < 2 && i + 1 < repl.size() && is_octal(repl[i + 1]); ++k) {
        value = value * 8 + (repl[++i] - '0');
      }
      tpl.back().literal += static_cast<char>(value);
    } else if (is_digit(e)) {
      if (i + 2 < repl.size() && is_octal(e) && is_octal(repl[i + 1]) && is_octal(repl[i + 2])) {
        int value = (e - '0') * 64 + (repl[i + 1] - '0') * 8 + (repl[i + 2] - '0');
        if (value > 0377) throw base::error("octal escape value out of range");
        tpl.back().literal += static_cast<char>(value);
        i += 2;
      } else {
        int g = e - '0';
        if (i + 1 < repl.size() && is_digit(repl[i + 1])) g = g * 10 + (repl[++i] - '0');
        add_group(g);
      }
    } else {
      static constexpr std::string_view from = "abfnrtv\\", to = "\a\b\f\n\r\t\v\\";
      if (auto at = from.find(e); at != std::string_view::npos) {
        tpl.back().literal += to[at];
      } else if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) {
        throw base::error(std::string("bad escape \\") + e);
      } else {
        tpl.back().literal += '\\';
        tpl.back().literal += e;
      }
    }
  }
  // Python 3.7+: an empty match right after a previous match is allowed;
  // an empty match is never taken where the previous one ended empty.
  std::string out;
  long long n = 0;
  std::size_t copied = 0, at = 0;
  bool after_empty = false;
  while (count <= 0 || n < count) {
    bool found = false;
    if (after_empty) {
      found = run(subject, at, PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED);
      if (!found) {
        if (at >= subject.size()) break;
        ++at;
      }
    }
    if (!found && !run(subject, at, 0)) break;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(impl_->match);
    std::size_t s = ov[0], e = ov[1];
    out.append(subject.substr(copied, s - copied));
    for (const auto& p : tpl) {
      if (p.group < 0) {
        out += p.literal;
      } else if (p.group < impl_->count && ov[2 * p.group] != PCRE2_UNSET) {
        out.append(subject.substr(ov[2 * p.group], ov[2 * p.group + 1] - ov[2 * p.group]));
      }
    }
    ++n;
    copied = at = e;
    after_empty = s == e;
  }
  out.append(subject.substr(copied));
  return {std::move(out), n};
}

}  // namespace brine::modules
