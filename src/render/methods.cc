#include <algorithm>
#include <cctype>

#include "base/utf8.h"
#include "render/interpreter.h"

// The Python methods of str, list, tuple and dict that Salt formulas call.
namespace brine::render::detail {
namespace {

bool ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

std::string strip(const std::string& s, const value& chars, bool left, bool right) {
  if (!chars.is_undefined() && !chars.is_none() && !chars.is_string())
    throw template_error("strip arg must be None or str");
  auto drop = [&](char c) {
    if (chars.is_undefined() || chars.is_none()) return ascii_space(c);
    return chars.as_string().find(c) != std::string::npos;
  };
  std::size_t b = 0;
  std::size_t e = s.size();
  if (left)
    while (b < e && drop(s[b])) ++b;
  if (right)
    while (e > b && drop(s[e - 1])) --e;
  return s.substr(b, e - b);
}

std::vector<value> split(const std::string& s, const value& sep, std::int64_t maxsplit,
                         bool from_right) {
  if (!sep.is_undefined() && !sep.is_none() && !sep.is_string())
    throw template_error("must be str or None, not " + type_name(sep));
  std::vector<std::string> parts;
  if (sep.is_undefined() || sep.is_none()) {
    if (!from_right) {
      std::size_t i = 0;
      while (true) {
        while (i < s.size() && ascii_space(s[i])) ++i;
        if (i >= s.size()) break;
        if (maxsplit >= 0 && static_cast<std::int64_t>(parts.size()) == maxsplit) {
          std::string rest = s.substr(i);
          while (!rest.empty() && ascii_space(rest.back())) rest.pop_back();
          parts.push_back(rest);
          break;
        }
        std::size_t j = i;
        while (j < s.size() && !ascii_space(s[j])) ++j;
        parts.push_back(s.substr(i, j - i));
        i = j;
      }
    } else {
      std::size_t i = s.size();
      while (true) {
        while (i > 0 && ascii_space(s[i - 1])) --i;
        if (i == 0) break;
        if (maxsplit >= 0 && static_cast<std::int64_t>(parts.size()) == maxsplit) {
          std::string rest = s.substr(0, i);
          std::size_t k = 0;
          while (k < rest.size() && ascii_space(rest[k])) ++k;
          parts.push_back(rest.substr(k));
          break;
        }
        std::size_t j = i;
        while (j > 0 && !ascii_space(s[j - 1])) --j;
        parts.push_back(s.substr(j, i - j));
        i = j;
      }
      std::reverse(parts.begin(), parts.end());
    }
  } else {
    const std::string& d = sep.as_string();
    if (d.empty()) throw template_error("empty separator");
    if (!from_right) {
      std::size_t i = 0;
      while (true) {
        auto f = s.find(d, i);
        if (f == std::string::npos ||
            (maxsplit >= 0 && static_cast<std::int64_t>(parts.size()) == maxsplit)) {
          parts.push_back(s.substr(i));
          break;
        }
        parts.push_back(s.substr(i, f - i));
        i = f + d.size();
      }
    } else {
      std::size_t end = s.size();
      while (true) {
        std::size_t f = end >= d.size() ? s.rfind(d, end - d.size()) : std::string::npos;
        if (f == std::string::npos ||
            (maxsplit >= 0 && static_cast<std::int64_t>(parts.size()) == maxsplit)) {
          parts.push_back(s.substr(0, end));
          break;
        }
        parts.push_back(s.substr(f + d.size(), end - f - d.size()));
        end = f;
      }
      std::reverse(parts.begin(), parts.end());
    }
  }
  std::vector<value> out;
  for (auto& p : parts) out.emplace_back(std::move(p));
  return out;
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string py_title(const std::string& s) {
  std::string out;
  bool prev_cased = false;
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (std::isalpha(u)) {
      out += static_cast<char>(prev_cased ? std::tolower(u) : std::toupper(u));
      prev_cased = true;
    } else {
      out += c;
      prev_cased = false;
    }
  }
  return out;
}

value string_arg(call_args& a, std::size_t pos, const char* name) {
  value v = argument(a, pos, name);
  v.defined();
  if (!v.is_string()) throw template_error(std::string(name) + " must be str, not " + type_name(v));
  return v;
}

bool affix_match(const std::string& s, const value& arg, bool start) {
  auto one = [&](const value& p) {
    if (!p.is_string()) throw template_error("startswith first arg must be str or a tuple of str");
    const std::string& x = p.as_string();
    if (x.size() > s.size()) return false;
    return start ? s.compare(0, x.size(), x) == 0
                 : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (arg.is_tuple()) return std::any_of(arg.items().begin(), arg.items().end(), one);
  return one(arg);
}

std::int64_t index_of(const std::vector<value>& items, const value& v) {
  for (std::size_t i = 0; i < items.size(); ++i)
    if (equal(items[i], v)) return static_cast<std::int64_t>(i);
  return -1;
}

std::size_t normalize_index(std::int64_t i, std::size_t n, bool clamp) {
  auto sn = static_cast<std::int64_t>(n);
  if (i < 0) i += sn;
  if (clamp) i = std::clamp<std::int64_t>(i, 0, sn);
  return static_cast<std::size_t>(i);
}

value string_method(const value& obj, const std::string& name, call_args& a) {
  const std::string& s = obj.as_string();
  if (name == "split" || name == "rsplit")
    return value::make_list(split(s, argument(a, 0, "sep", nullptr),
                                  to_int(argument(a, 1, "maxsplit", -1), "maxsplit"),
                                  name == "rsplit"));
  if (name == "strip" || name == "lstrip" || name == "rstrip")
    return strip(s, argument(a, 0, "chars", nullptr), name != "rstrip", name != "lstrip");
  if (name == "startswith" || name == "endswith")
    return affix_match(s, argument(a, 0, "prefix").defined(), name == "startswith");
  if (name == "replace") {
    std::string from = string_arg(a, 0, "old").as_string();
    std::string to = string_arg(a, 1, "new").as_string();
    std::int64_t count = to_int(argument(a, 2, "count", -1), "count");
    std::string out;
    std::size_t i = 0;
    std::int64_t done = 0;
    while (count < 0 || done < count) {
      std::size_t f = from.empty() ? (i <= s.size() ? i : std::string::npos) : s.find(from, i);
      if (f == std::string::npos) break;
      out += s.substr(i, f - i) + to;
      if (from.empty()) {
        if (f < s.size()) out += s[f];
        i = f + 1;
      } else {
        i = f + from.size();
      }
      ++done;
    }
    if (i < s.size()) out += s.substr(i);
    return out;
  }
  if (name == "lower") return lower(s);
  if (name == "upper") return upper(s);
  if (name == "title") return py_title(s);
  if (name == "capitalize") {
    std::string out = lower(s);
    if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
    return out;
  }
  if (name == "swapcase") {
    std::string out = s;
    for (auto& c : out) {
      auto u = static_cast<unsigned char>(c);
      c = static_cast<char>(std::isupper(u) ? std::tolower(u) : std::toupper(u));
    }
    return out;
  }
  if (name == "join") {
    std::string out;
    bool first = true;
    for (const auto& e : iterate(argument(a, 0, "iterable").defined())) {
      if (!e.is_string())
        throw template_error("sequence item: expected str instance, " + type_name(e) + " found");
      if (!first) out += s;
      first = false;
      out += e.as_string();
    }
    return out;
  }
  if (name == "format") return str_format(s, a);
  if (name == "partition" || name == "rpartition") {
    std::string sep = string_arg(a, 0, "sep").as_string();
    if (sep.empty()) throw template_error("empty separator");
    auto f = name == "partition" ? s.find(sep) : s.rfind(sep);
    if (f == std::string::npos)
      return name == "partition" ? value::make_tuple({value(s), value(""), value("")})
                                 : value::make_tuple({value(""), value(""), value(s)});
    return value::make_tuple({value(s.substr(0, f)), value(sep), value(s.substr(f + sep.size()))});
  }
  if (name == "count") {
    std::string sub = string_arg(a, 0, "sub").as_string();
    if (sub.empty()) return static_cast<std::int64_t>(iterate(obj).size() + 1);
    std::int64_t n = 0;
    for (std::size_t f = s.find(sub); f != std::string::npos; f = s.find(sub, f + sub.size())) ++n;
    return n;
  }
  if (name == "find" || name == "index" || name == "rfind" || name == "rindex") {
    std::string sub = string_arg(a, 0, "sub").as_string();
    std::size_t start =
        normalize_index(to_int(argument(a, 1, "start", 0), "start"), s.size(), true);
    auto f = name[0] == 'r' ? s.rfind(sub) : s.find(sub, start);
    if (f != std::string::npos && f < start) f = std::string::npos;
    if (f == std::string::npos) {
      if (name == "index" || name == "rindex") throw template_error("substring not found");
      return -1;
    }
    return static_cast<std::int64_t>(f);
  }
  if (name == "splitlines") {
    bool keep = argument(a, 0, "keepends", false).truthy();
    std::vector<value> out;
    std::size_t i = 0;
    while (i < s.size()) {
      std::size_t j = i;
      // Python's line boundaries: \n \r \r\n \v \f \x1c \x1d \x1e, and
      // U+0085, U+2028, U+2029 (as UTF-8).
      std::size_t width = 0;
      for (; j < s.size(); ++j) {
        auto c = static_cast<unsigned char>(s[j]);
        if (c == '\n' || c == '\r' || c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1e)) {
          width = (c == '\r' && j + 1 < s.size() && s[j + 1] == '\n') ? 2 : 1;
          break;
        }
        if (c == 0xc2 && j + 1 < s.size() && static_cast<unsigned char>(s[j + 1]) == 0x85) {
          width = 2;
          break;
        }
        if (c == 0xe2 && j + 2 < s.size() && static_cast<unsigned char>(s[j + 1]) == 0x80 &&
            (static_cast<unsigned char>(s[j + 2]) == 0xa8 || static_cast<unsigned char>(s[j + 2]) == 0xa9)) {
          width = 3;
          break;
        }
      }
      std::size_t e = j + width;
      out.emplace_back(s.substr(i, (keep ? e : j) - i));
      i = e;
    }
    return value::make_list(std::move(out));
  }
  auto all = [&](auto pred) {
    if (s.empty()) return false;
    return std::all_of(s.begin(), s.end(),
                       [&](char c) { return pred(static_cast<unsigned char>(c)); });
  };
  if (name == "isdigit") return all([](unsigned char c) { return std::isdigit(c) != 0; });
  if (name == "isalpha") return all([](unsigned char c) { return std::isalpha(c) != 0; });
  if (name == "isalnum") return all([](unsigned char c) { return std::isalnum(c) != 0; });
  if (name == "isspace") return all([](unsigned char c) { return std::isspace(c) != 0; });
  if (name == "islower" || name == "isupper") {
    bool cased = false;
    for (char c : s) {
      auto u = static_cast<unsigned char>(c);
      if (std::isalpha(u)) {
        cased = true;
        if ((name == "islower") != (std::islower(u) != 0)) return false;
      }
    }
    return cased;
  }
  if (name == "zfill" || name == "ljust" || name == "rjust" || name == "center") {
    std::int64_t width = to_int(argument(a, 0, "width"), "width");
    std::string fill = name == "zfill" ? "0" : argument(a, 1, "fillchar", " ").str();
    auto len = static_cast<std::int64_t>(iterate(obj).size());
    if (width <= len) return s;
    auto n = static_cast<std::size_t>(width - len);
    charge_steps(n);
    auto rep = [&](std::size_t k) {
      std::string out;
      for (std::size_t i = 0; i < k; ++i) out += fill;
      return out;
    };
    if (name == "ljust") return s + rep(n);
    if (name == "rjust") return rep(n) + s;
    if (name == "zfill") {
      if (!s.empty() && (s[0] == '-' || s[0] == '+')) return s.substr(0, 1) + rep(n) + s.substr(1);
      return rep(n) + s;
    }
    std::size_t left = n / 2 + (n & static_cast<std::size_t>(width) & 1);
    return rep(left) + s + rep(n - left);
  }
  if (name == "casefold") return lower(s);
  if (name == "removeprefix" || name == "removesuffix") {
    std::string affix = string_arg(a, 0, name == "removeprefix" ? "prefix" : "suffix").as_string();
    if (name == "removeprefix") return s.starts_with(affix) ? s.substr(affix.size()) : s;
    return !affix.empty() && s.ends_with(affix) ? s.substr(0, s.size() - affix.size()) : s;
  }
  if (name == "expandtabs") {
    std::int64_t tab = to_int(argument(a, 0, "tabsize", 8), "tabsize");
    std::string out;
    std::int64_t column = 0;
    for (char c : s) {
      if (c == '\t') {
        if (tab > 0) {
          std::int64_t pad = tab - column % tab;
          charge_steps(static_cast<std::size_t>(pad));
          out.append(static_cast<std::size_t>(pad), ' ');
          column += pad;
        }
      } else {
        out += c;
        if (c == '\n' || c == '\r') {
          column = 0;
        } else if ((static_cast<unsigned char>(c) & 0xc0) != 0x80) {
          ++column;
        }
      }
    }
    return out;
  }
  if (name == "format_map") {
    value m = argument(a, 0, "mapping").defined();
    if (!m.is_dict()) throw template_error("'" + type_name(m) + "' object is not a mapping");
    call_args kw;
    for (const auto& [k, v] : m.dict().entries)
      if (k.is_string()) kw.keyword.emplace_back(k.as_string(), v);
    return str_format(s, kw);
  }
  if (name == "isascii")
    return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
  if (name == "isdecimal" || name == "isnumeric")
    return all([](unsigned char c) { return std::isdigit(c) != 0; });
  if (name == "isidentifier") {
    if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
    return std::all_of(s.begin(), s.end(), [](char c) {
      auto u = static_cast<unsigned char>(c);
      return std::isalnum(u) || u == '_' || u >= 0x80;
    });
  }
  if (name == "isprintable")
    return std::all_of(s.begin(), s.end(), [](char c) {
      auto u = static_cast<unsigned char>(c);
      return u >= 0x80 || (u >= 0x20 && u < 0x7f);
    });
  if (name == "istitle") {
    bool cased = false, prev_cased = false;
    for (char c : s) {
      auto u = static_cast<unsigned char>(c);
      if (std::isupper(u)) {
        if (prev_cased) return false;
        prev_cased = cased = true;
      } else if (std::islower(u)) {
        if (!prev_cased) return false;
        prev_cased = cased = true;
      } else {
        prev_cased = false;
      }
    }
    return cased;
  }
  if (name == "maketrans") {
    value table = value::make_dict();
    value x = argument(a, 0, "x").defined();
    if (!has_argument(a, 1, "y")) {
      if (!x.is_dict()) throw template_error("if you give only one argument to maketrans it must be a dict");
      for (const auto& [k, v] : x.dict().entries) {
        if (k.is_string()) {
          auto cps = base::utf8_code_points(k.as_string());
          if (cps.size() != 1) throw template_error("string keys in translate table must be of length 1");
          table.dict().set(value(static_cast<std::int64_t>(cps[0])), v);
        } else {
          table.dict().set(k, v);
        }
      }
      return table;
    }
    auto from = base::utf8_code_points(string_arg(a, 0, "x").as_string());
    auto to = base::utf8_code_points(string_arg(a, 1, "y").as_string());
    if (from.size() != to.size())
      throw template_error("the first two maketrans arguments must have equal length");
    for (std::size_t i = 0; i < from.size(); ++i)
      table.dict().set(value(static_cast<std::int64_t>(from[i])), value(static_cast<std::int64_t>(to[i])));
    if (has_argument(a, 2, "z"))
      for (auto cp : base::utf8_code_points(string_arg(a, 2, "z").as_string()))
        table.dict().set(value(static_cast<std::int64_t>(cp)), value(nullptr));
    return table;
  }
  if (name == "translate") {
    value table = argument(a, 0, "table").defined();
    std::string out;
    std::size_t i = 0;
    for (auto cp : base::utf8_code_points(s)) {
      std::size_t len = base::utf8_sequence_length(static_cast<unsigned char>(s[i]));
      std::string original = s.substr(i, len);
      i += len;
      const value* to = table.is_dict() ? table.dict().find(value(static_cast<std::int64_t>(cp))) : nullptr;
      if (to == nullptr) {
        out += original;
      } else if (to->is_none()) {
        continue;
      } else if (to->is_int()) {
        base::append_utf8(out, static_cast<char32_t>(to->as_int()));
      } else if (to->is_string()) {
        out += to->as_string();
      } else {
        throw template_error("character mapping must return integer, None or str");
      }
    }
    return out;
  }
  throw template_error("'str' object has no attribute '" + name + "'");
}

value list_method(const value& obj, const std::string& name, call_args& a) {
  auto& items = obj.items();
  if (name == "index") {
    auto i = index_of(items, argument(a, 0, "value").defined());
    if (i < 0) throw template_error(argument(a, 0, "value").repr() + " is not in list");
    return i;
  }
  if (name == "count") {
    value v = argument(a, 0, "value").defined();
    return static_cast<std::int64_t>(
        std::count_if(items.begin(), items.end(), [&](const value& e) { return equal(e, v); }));
  }
  if (obj.is_tuple()) throw template_error("'tuple' object has no attribute '" + name + "'");
  if (name == "append") {
    items.push_back(argument(a, 0, "object").defined());
    return nullptr;
  }
  if (name == "extend") {
    auto more = iterate(argument(a, 0, "iterable"));
    items.insert(items.end(), more.begin(), more.end());
    return nullptr;
  }
  if (name == "insert") {
    std::size_t i = normalize_index(to_int(argument(a, 0, "index"), "index"), items.size(), true);
    items.insert(items.begin() + static_cast<std::ptrdiff_t>(i),
                 argument(a, 1, "object").defined());
    return nullptr;
  }
  if (name == "pop") {
    if (items.empty()) throw template_error("pop from empty list");
    std::int64_t raw = to_int(argument(a, 0, "index", -1), "index");
    std::size_t i = normalize_index(raw, items.size(), false);
    if (i >= items.size()) throw template_error("pop index out of range");
    value v = items[i];
    items.erase(items.begin() + static_cast<std::ptrdiff_t>(i));
    return v;
  }
  if (name == "remove") {
    auto i = index_of(items, argument(a, 0, "value").defined());
    if (i < 0) throw template_error("list.remove(x): x not in list");
    items.erase(items.begin() + i);
    return nullptr;
  }
  if (name == "reverse") {
    std::reverse(items.begin(), items.end());
    return nullptr;
  }
  if (name == "sort") {
    bool rev = argument(a, 1, "reverse", false).truthy();
    std::stable_sort(items.begin(), items.end(),
                     [&](const value& x, const value& y) { return rev ? less(y, x) : less(x, y); });
    return nullptr;
  }
  if (name == "copy") return value::make_list(items);
  if (name == "clear") {
    items.clear();
    return nullptr;
  }
  throw template_error("'list' object has no attribute '" + name + "'");
}

value dict_method(const value& obj, const std::string& name, call_args& a) {
  auto& d = obj.dict();
  if (name == "get") {
    value k = argument(a, 0, "key").defined();
    if (value* v = d.find(k)) return *v;
    return argument(a, 1, "default", nullptr);
  }
  if (name == "items" || name == "keys" || name == "values") {
    std::vector<value> out;
    for (const auto& [k, v] : d.entries) {
      if (name == "items") {
        out.push_back(value::make_tuple({k, v}));
      } else {
        out.push_back(name == "keys" ? k : v);
      }
    }
    value l = value::make_list(std::move(out));
    l.list().view = "dict_" + name;
    return l;
  }
  if (name == "update") {
    if (!a.positional.empty()) {
      const value& other = a.positional[0].defined();
      if (other.is_dict()) {
        auto entries = other.dict().entries;
        for (auto& [k, v] : entries) d.set(k, v);
      } else {
        for (const auto& pair : iterate(other)) {
          auto kv = iterate(pair);
          if (kv.size() != 2)
            throw template_error("dictionary update sequence element has wrong length");
          d.set(kv[0], kv[1]);
        }
      }
    }
    for (auto& [k, v] : a.keyword) d.set(value(k), v);
    return nullptr;
  }
  if (name == "pop") {
    value k = argument(a, 0, "key").defined();
    if (value* v = d.find(k)) {
      value out = *v;
      d.erase(k);
      return out;
    }
    if (has_argument(a, 1, "default")) return argument(a, 1, "default");
    throw template_error("KeyError: " + k.repr());
  }
  if (name == "popitem") {
    if (d.entries.empty()) throw template_error("KeyError: 'popitem(): dictionary is empty'");
    auto [k, v] = d.entries.back();
    d.erase(k);
    return value::make_tuple({k, v});
  }
  if (name == "fromkeys") {
    value out = value::make_dict();
    value v = argument(a, 1, "value", nullptr);
    for (const auto& k : iterate(argument(a, 0, "iterable").defined())) out.dict().set(k, v);
    return out;
  }
  if (name == "setdefault") {
    value k = argument(a, 0, "key").defined();
    if (value* v = d.find(k)) return *v;
    value dflt = argument(a, 1, "default", nullptr);
    d.set(k, dflt);
    return dflt;
  }
  if (name == "copy") {
    value out = value::make_dict();
    out.dict().entries = d.entries;
    out.dict().ordered_dict = d.ordered_dict;  // OrderedDict.copy() is an OrderedDict
    return out;
  }
  if (name == "clear") {
    d.entries.clear();
    return nullptr;
  }
  throw template_error("'dict' object has no attribute '" + name + "'");
}

bool has_method(const value& obj, const std::string& name) {
  static const char* const str_methods[] = {
      "split",   "rsplit",     "strip",      "lstrip",  "rstrip",     "startswith", "endswith",
      "replace", "lower",      "upper",      "title",   "capitalize", "swapcase",   "join",
      "format",  "partition",  "rpartition", "count",   "find",       "index",      "rfind",
      "rindex",  "splitlines", "isdigit",    "isalpha", "isalnum",    "isspace",    "islower",
      "isupper", "zfill",      "ljust",      "rjust",   "center",     "casefold",   "removeprefix",
      "removesuffix", "expandtabs", "format_map", "isascii", "isdecimal", "isnumeric",
      "isidentifier", "isprintable", "istitle", "maketrans", "translate"};
  static const char* const list_methods[] = {"index",  "count", "append", "extend",
                                             "insert", "pop",   "remove", "reverse",
                                             "sort",   "copy",  "clear"};
  static const char* const dict_methods[] = {"get",        "items", "keys",  "values",  "update",
                                             "pop",        "setdefault", "copy", "clear", "popitem",
                                             "fromkeys"};
  auto in = [&](const auto& names) {
    return std::any_of(std::begin(names), std::end(names),
                       [&](const char* n) { return name == n; });
  };
  if (obj.is_string()) return in(str_methods);
  if (obj.is_list()) return in(list_methods);
  if (obj.is_tuple()) return name == "index" || name == "count";
  if (obj.is_dict() && !obj.is_namespace()) return in(dict_methods);
  return false;
}

}  // namespace

thread_local std::vector<value>* mutation_log = nullptr;

value method(const value& obj, const std::string& name) {
  if (!has_method(obj, name))
    return value::undefined("'" + type_name(obj) + " object' has no attribute '" + name + "'");
  return value::make_callable(type_name(obj) + "." + name, [obj, name](call_args& a) -> value {
    if (obj.is_string()) return string_method(obj, name, a);
    if (mutation_log && (name == "append" || name == "extend" || name == "insert" ||
                         name == "update" || name == "setdefault"))
      mutation_log->push_back(obj);
    if (obj.is_dict()) return dict_method(obj, name, a);
    return list_method(obj, name, a);
  });
}

std::int64_t parse_digits(const std::string& digits, std::int64_t limit, const char* what) {
  std::int64_t n = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') throw template_error(std::string(what) + ": not a number");
    n = n * 10 + (c - '0');
    if (n > limit) throw template_error(std::string(what) + " too big");
  }
  return n;
}

std::int64_t to_int(const value& v, const char* what) {
  v.defined();
  if (v.is_bool()) return v.as_bool();
  if (v.is_int()) return v.as_int();
  throw template_error(std::string(what) + ": '" + type_name(v) +
                       "' object cannot be interpreted as an integer");
}

value argument(call_args& args, std::size_t pos, const char* name, value dflt) {
  if (pos < args.positional.size()) return args.positional[pos];
  for (const auto& [k, v] : args.keyword)
    if (k == name) return v;
  if (dflt.is_undefined() && dflt.undefined_message().empty())
    throw template_error(std::string("missing required argument '") + name + "'");
  return dflt;
}

bool has_argument(const call_args& args, std::size_t pos, const char* name) {
  if (pos < args.positional.size()) return true;
  return std::any_of(args.keyword.begin(), args.keyword.end(),
                     [&](const auto& kv) { return kv.first == name; });
}

}  // namespace brine::render::detail
