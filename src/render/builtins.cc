#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "base/python.h"
#include "base/utf8.h"
#include "render/interpreter.h"
#include "render/python_json.h"
#include "render/salt_filters.h"

// Jinja's built-in filters, tests and globals (Jinja 3.1 signatures).
namespace brine::render::detail {
namespace {

using fmap = std::map<std::string, filter_fn>;
using tmap = std::map<std::string, test_fn>;

std::string lower_ascii(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string upper_ascii(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// The key Jinja sorts and compares by: lower-cased strings unless case_sensitive.
value sort_key(const value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return lower_ascii(v.as_string());
  return v;
}

// Jinja's make_attrgetter: "a.b.0" looks up a, then b, then item 0.
value attribute_of(interpreter& in, const value& item, const value& attribute) {
  if (attribute.is_int()) return in.getitem(item, attribute);
  std::string path = attribute.str();
  value v = item;
  std::size_t i = 0;
  while (true) {
    auto dot = path.find('.', i);
    std::string part = path.substr(i, dot == std::string::npos ? std::string::npos : dot - i);
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) {
      return std::isdigit(static_cast<unsigned char>(c));
    });
    v = digits ? in.getitem(v, value(parse_digits(part, INT64_MAX / 10, "index")))
               : in.getitem(v, value(part));
    if (dot == std::string::npos) return v;
    i = dot + 1;
  }
}

call_args rest_args(const call_args& a, std::size_t from) {
  call_args out;
  for (std::size_t i = from; i < a.positional.size(); ++i)
    out.positional.push_back(a.positional[i]);
  out.keyword = a.keyword;
  return out;
}

value f_default(interpreter&, const value& v, call_args& a) {
  value dflt = argument(a, 0, "default_value", "");
  bool boolean = argument(a, 1, "boolean", false).truthy();
  if (v.is_undefined() || (boolean && !v.truthy())) return dflt;
  return v;
}

value f_join(interpreter& in, const value& v, call_args& a) {
  std::string sep = argument(a, 0, "d", "").str();
  value attr = argument(a, 1, "attribute", nullptr);
  std::string out;
  bool first = true;
  for (const auto& e : iterate(v)) {
    if (!first) out += sep;
    first = false;
    out += (attr.is_none() ? e : attribute_of(in, e, attr)).str();
  }
  return out;
}

value f_length(interpreter&, const value& v, call_args&) {
  if (v.is_lenient_undefined()) return 0;
  v.defined();
  if (v.is_string()) return static_cast<std::int64_t>(base::python_len(v.as_string()));
  if (v.is_dict()) return static_cast<std::int64_t>(v.dict().entries.size());
  if (v.is_sequence_like()) return static_cast<std::int64_t>(v.items().size());
  throw template_error("object of type '" + type_name(v) + "' has no len()");
}

value f_upper(interpreter&, const value& v, call_args&) { return upper_ascii(v.str()); }
value f_lower(interpreter&, const value& v, call_args&) { return lower_ascii(v.str()); }

value f_title(interpreter&, const value& v, call_args&) {
  // Jinja splits words at whitespace and -({[<, then upper-cases each first letter.
  std::string s = v.str();
  std::string out;
  bool start = true;
  for (char c : s) {
    bool sep = std::isspace(static_cast<unsigned char>(c)) || c == '-' || c == '(' || c == '{' ||
               c == '[' || c == '<';
    if (sep) {
      out += c;
      start = true;
    } else {
      out += static_cast<char>(start ? std::toupper(static_cast<unsigned char>(c))
                                     : std::tolower(static_cast<unsigned char>(c)));
      start = false;
    }
  }
  return out;
}

value f_capitalize(interpreter&, const value& v, call_args&) {
  std::string s = lower_ascii(v.str());
  if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
  return s;
}

value f_trim(interpreter&, const value& v, call_args& a) {
  value m = method(value(v.str()), "strip");
  call_args b;
  b.positional.push_back(argument(a, 0, "chars", nullptr));
  return m.callable().fn(b);
}

value f_replace(interpreter&, const value& v, call_args& a) {
  value m = method(value(v.str()), "replace");
  call_args b;
  b.positional.push_back(argument(a, 0, "old").str());
  b.positional.push_back(argument(a, 1, "new").str());
  value count = argument(a, 2, "count", nullptr);
  if (!count.is_none()) b.positional.push_back(count);
  return m.callable().fn(b);
}

value f_first(interpreter&, const value& v, call_args&) {
  auto items = iterate(v);
  if (items.empty()) return value::undefined("No first item, sequence was empty.");
  return items.front();
}

value f_last(interpreter&, const value& v, call_args&) {
  auto items = iterate(v);
  if (items.empty()) return value::undefined("No last item, sequence was empty.");
  return items.back();
}

value f_list(interpreter&, const value& v, call_args&) { return value::make_list(iterate(v)); }

value f_sort(interpreter& in, const value& v, call_args& a) {
  bool reverse = argument(a, 0, "reverse", false).truthy();
  bool cs = argument(a, 1, "case_sensitive", false).truthy();
  value attr = argument(a, 2, "attribute", nullptr);
  auto items = iterate(v);
  std::vector<std::pair<value, value>> keyed;
  for (auto& e : items)
    keyed.emplace_back(sort_key(attr.is_none() ? e : attribute_of(in, e, attr), cs), e);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return reverse ? less(y.first, x.first) : less(x.first, y.first);
  });
  std::vector<value> out;
  for (auto& [k, e] : keyed) out.push_back(e);
  return value::make_list(std::move(out));
}

value f_unique(interpreter& in, const value& v, call_args& a) {
  bool cs = argument(a, 0, "case_sensitive", false).truthy();
  value attr = argument(a, 1, "attribute", nullptr);
  std::vector<value> seen;
  std::vector<value> out;
  for (const auto& e : iterate(v)) {
    value k = sort_key(attr.is_none() ? e : attribute_of(in, e, attr), cs);
    if (std::none_of(seen.begin(), seen.end(), [&](const value& s) { return equal(s, k); })) {
      seen.push_back(k);
      out.push_back(e);
    }
  }
  return value::make_list(std::move(out));
}

value f_reverse(interpreter&, const value& v, call_args&) {
  auto items = iterate(v);
  std::reverse(items.begin(), items.end());
  if (v.is_string()) {
    std::string s;
    for (auto& c : items) s += c.as_string();
    return s;
  }
  return value::make_list(std::move(items));
}

std::optional<std::int64_t> parse_int(std::string s, int base) {
  // Python's int() refuses another base (ValueError); strtoll would leave
  // `end` unset.
  if (base != 0 && (base < 2 || base > 36)) return std::nullopt;
  auto b = s.find_first_not_of(" \t\n\r");
  auto e = s.find_last_not_of(" \t\n\r");
  if (b == std::string::npos) return std::nullopt;
  s = s.substr(b, e - b + 1);
  std::string clean;
  for (char c : s)
    if (c != '_') clean += c;
  if (base == 16 && clean.size() > 2 && clean[0] == '0' && (clean[1] == 'x' || clean[1] == 'X'))
    clean = clean.substr(2);
  if (base == 8 && clean.size() > 2 && clean[0] == '0' && (clean[1] == 'o' || clean[1] == 'O'))
    clean = clean.substr(2);
  if (base == 2 && clean.size() > 2 && clean[0] == '0' && (clean[1] == 'b' || clean[1] == 'B'))
    clean = clean.substr(2);
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(clean.c_str(), &end, base);
  if (clean.empty() || *end != '\0' || errno == ERANGE) return std::nullopt;
  return static_cast<std::int64_t>(v);
}

std::optional<double> parse_float(const std::string& s) {
  auto b = s.find_first_not_of(" \t\n\r");
  if (b == std::string::npos) return std::nullopt;
  auto e = s.find_last_not_of(" \t\n\r");
  std::string t = s.substr(b, e - b + 1);
  char* end = nullptr;
  double d = std::strtod(t.c_str(), &end);
  if (*end != '\0') return std::nullopt;
  if (std::isalpha(static_cast<unsigned char>(t[0])) ||
      ((t[0] == '-' || t[0] == '+') && t.size() > 1 &&
       std::isalpha(static_cast<unsigned char>(t[1])))) {
    std::string l = lower_ascii(t);
    if (l.find("inf") == std::string::npos && l.find("nan") == std::string::npos)
      return std::nullopt;
  }
  return d;
}

value f_int(interpreter&, const value& v, call_args& a) {
  value dflt = argument(a, 0, "default", 0);
  int base = static_cast<int>(to_int(argument(a, 1, "base", 10), "base"));
  v.defined();
  if (v.is_bool()) return std::int64_t{v.as_bool()};
  if (v.is_int()) return v;
  if (v.is_float()) {
    if (!std::isfinite(v.as_float())) return dflt;
    return static_cast<std::int64_t>(std::trunc(v.as_float()));
  }
  if (v.is_string()) {
    if (auto i = parse_int(v.as_string(), base)) return *i;
    if (auto d = parse_float(v.as_string()); d && std::isfinite(*d))
      return static_cast<std::int64_t>(std::trunc(*d));
  }
  return dflt;
}

value f_float(interpreter&, const value& v, call_args& a) {
  value dflt = argument(a, 0, "default", 0.0);
  v.defined();
  if (v.is_number()) return v.to_double();
  if (v.is_string())
    if (auto d = parse_float(v.as_string())) return *d;
  return dflt;
}

value f_string(interpreter&, const value& v, call_args&) { return v.str(); }

value f_abs(interpreter&, const value& v, call_args&) {
  v.defined();
  if (v.is_float()) return std::fabs(v.as_float());
  if (v.is_int() || v.is_bool()) {
    std::int64_t i = v.is_bool() ? std::int64_t{v.as_bool()} : v.as_int();
    if (i == INT64_MIN) throw template_error("integer overflow");
    return i < 0 ? -i : i;
  }
  throw template_error("bad operand type for abs(): '" + type_name(v) + "'");
}

value f_round(interpreter&, const value& v, call_args& a) {
  auto precision = static_cast<int>(to_int(argument(a, 0, "precision", 0), "precision"));
  std::string method = argument(a, 1, "method", "common").str();
  v.defined();
  if (!v.is_number())
    throw template_error("type " + type_name(v) + " doesn't define __round__ method");
  double d = v.to_double();
  if (method == "common") {
    if (v.is_int() || v.is_bool()) return v.is_bool() ? value(std::int64_t{v.as_bool()}) : v;
    if (precision == 0) return std::nearbyint(d);
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", std::clamp(precision, 0, 300), d);
    return std::strtod(buf, nullptr);
  }
  if (method != "ceil" && method != "floor")
    throw template_error("method must be 'common', 'ceil' or 'floor'");
  double m = std::pow(10.0, precision);
  return (method == "ceil" ? std::ceil(d * m) : std::floor(d * m)) / m;
}

value f_dictsort(interpreter&, const value& v, call_args& a) {
  bool cs = argument(a, 0, "case_sensitive", false).truthy();
  std::string by = argument(a, 1, "by", "key").str();
  bool reverse = argument(a, 2, "reverse", false).truthy();
  v.defined();
  if (!v.is_dict()) throw template_error("dictsort: expected a mapping, got " + type_name(v));
  if (by != "key" && by != "value")
    throw template_error("You can only sort by either \"key\" or \"value\"");
  std::vector<value> pairs;
  for (const auto& [k, e] : v.dict().entries) pairs.push_back(value::make_tuple({k, e}));
  std::size_t pos = by == "key" ? 0 : 1;
  std::stable_sort(pairs.begin(), pairs.end(), [&](const value& x, const value& y) {
    value kx = sort_key(x.items()[pos], cs);
    value ky = sort_key(y.items()[pos], cs);
    return reverse ? less(ky, kx) : less(kx, ky);
  });
  return value::make_list(std::move(pairs));
}

value f_items(interpreter&, const value& v, call_args&) {
  if (v.is_undefined()) return value::make_list();
  if (!v.is_dict()) throw template_error("Can only get item pairs from a mapping.");
  std::vector<value> pairs;
  for (const auto& [k, e] : v.dict().entries) pairs.push_back(value::make_tuple({k, e}));
  return value::make_list(std::move(pairs));
}

// Jinja's map, select, reject, selectattr and rejectattr iterate only a true
// value (`if value: for item in value`): a false one, iterable or not,
// gives nothing.
std::vector<value> iterate_if_true(const value& v) {
  if (!v.defined().truthy()) return {};
  return iterate(v);
}

value f_map(interpreter& in, const value& v, call_args& a) {
  auto items = iterate_if_true(v);
  std::vector<value> out;
  bool by_attribute = a.positional.empty();
  if (by_attribute) {
    value attr = argument(a, 99, "attribute");
    bool has_default = has_argument(a, 99, "default");
    value dflt = has_default ? argument(a, 99, "default") : value();
    for (auto& e : items) {
      value r = attribute_of(in, e, attr);
      if (r.is_undefined() && has_default) r = dflt;
      out.push_back(r);
    }
  } else {
    std::string name = a.positional[0].str();
    call_args rest = rest_args(a, 1);
    for (auto& e : items) {
      call_args b = rest;
      out.push_back(in.filter(name, e, b));
    }
  }
  return value::make_list(std::move(out));
}

value select_like(interpreter& in, const value& v, call_args& a, bool by_attr, bool keep) {
  std::vector<value> out;
  std::size_t next = 0;
  value attr;
  if (by_attr) attr = argument(a, next++, "attribute");
  std::string test_name;
  if (next < a.positional.size()) test_name = a.positional[next++].str();
  call_args rest = rest_args(a, next);
  rest.keyword.clear();
  for (auto& e : iterate_if_true(v)) {
    value x = by_attr ? attribute_of(in, e, attr) : e;
    bool r = false;
    if (test_name.empty()) {
      r = x.truthy();
    } else {
      call_args b = rest;
      r = in.test(test_name, x, b);
    }
    if (r == keep) out.push_back(e);
  }
  return value::make_list(std::move(out));
}

value f_groupby(interpreter& in, const value& v, call_args& a) {
  value attr = argument(a, 0, "attribute");
  bool has_default = has_argument(a, 1, "default") && !argument(a, 1, "default").is_none();
  value dflt = has_default ? argument(a, 1, "default") : value();
  bool cs = argument(a, 2, "case_sensitive", false).truthy();
  std::vector<std::pair<value, value>> keyed;
  for (auto& e : iterate(v)) {
    value k = attribute_of(in, e, attr);
    if (k.is_undefined() && has_default) k = dflt;
    k.defined();
    keyed.emplace_back(k, e);
  }
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return less(sort_key(x.first, cs), sort_key(y.first, cs));
  });
  std::vector<value> groups;
  for (std::size_t i = 0; i < keyed.size();) {
    std::size_t j = i;
    std::vector<value> members;
    value key = sort_key(keyed[i].first, cs);
    while (j < keyed.size() && equal(sort_key(keyed[j].first, cs), key))
      members.push_back(keyed[j++].second);
    value group = value::make_tuple({keyed[i].first, value::make_list(std::move(members))});
    group.list().fields = {"grouper", "list"};
    groups.push_back(group);
    i = j;
  }
  return value::make_list(std::move(groups));
}

value f_urlencode(interpreter&, const value& v, call_args&) {
  v.defined();
  if (v.is_string()) return base::url_quote(v.as_string());
  std::vector<std::pair<value, value>> pairs;
  if (v.is_dict()) {
    pairs = v.dict().entries;
  } else {
    for (auto& p : iterate(v)) {
      auto kv = iterate(p);
      if (kv.size() != 2) throw template_error("urlencode: expected pairs");
      pairs.emplace_back(kv[0], kv[1]);
    }
  }
  std::string out;
  for (auto& [k, e] : pairs) {
    if (!out.empty()) out += "&";
    out += base::url_quote_plus(k.str()) + "=" + base::url_quote_plus(e.str());
  }
  return out;
}

value f_select(interpreter& in, const value& v, call_args& a) {
  return select_like(in, v, a, false, true);
}
value f_reject(interpreter& in, const value& v, call_args& a) {
  return select_like(in, v, a, false, false);
}
value f_selectattr(interpreter& in, const value& v, call_args& a) {
  return select_like(in, v, a, true, true);
}
value f_rejectattr(interpreter& in, const value& v, call_args& a) {
  return select_like(in, v, a, true, false);
}

value f_sum(interpreter& in, const value& v, call_args& a) {
  value attr = argument(a, 0, "attribute", nullptr);
  value total = argument(a, 1, "start", 0);
  for (auto& e : iterate(v))
    total = binary_op("+", total, attr.is_none() ? e : attribute_of(in, e, attr));
  return total;
}

value min_max(interpreter& in, const value& v, call_args& a, bool want_max) {
  bool cs = argument(a, 0, "case_sensitive", false).truthy();
  value attr = argument(a, 1, "attribute", nullptr);
  auto items = iterate(v);
  if (items.empty())
    return value::undefined(std::string("No aggregated item, sequence was empty."));
  std::size_t best = 0;
  value best_key = sort_key(attr.is_none() ? items[0] : attribute_of(in, items[0], attr), cs);
  for (std::size_t i = 1; i < items.size(); ++i) {
    value k = sort_key(attr.is_none() ? items[i] : attribute_of(in, items[i], attr), cs);
    if (want_max ? less(best_key, k) : less(k, best_key)) {
      best = i;
      best_key = k;
    }
  }
  return items[best];
}

value f_min(interpreter& in, const value& v, call_args& a) { return min_max(in, v, a, false); }
value f_max(interpreter& in, const value& v, call_args& a) { return min_max(in, v, a, true); }

value f_indent(interpreter&, const value& v, call_args& a) {
  value width = argument(a, 0, "width", 4);
  bool first = argument(a, 1, "first", false).truthy();
  bool blank = argument(a, 2, "blank", false).truthy();
  std::string ind;
  if (width.is_string()) {
    ind = width.as_string();
  } else {
    auto n = static_cast<std::size_t>(std::max<std::int64_t>(0, to_int(width, "width")));
    charge_steps(n);
    ind.assign(n, ' ');
  }
  // Jinja does `s += "\n"` and then `s.splitlines()`: only a string gets
  // through (a list takes the "\n" and has no splitlines).
  v.defined();
  if (v.is_list()) throw template_error("'list' object has no attribute 'splitlines'");
  if (v.is_tuple()) throw template_error("can only concatenate tuple (not \"str\") to tuple");
  if (!v.is_string())
    throw template_error("unsupported operand type(s) for +=: '" + type_name(v) + "' and 'str'");
  std::string s = v.as_string() + "\n";
  value lines_v = method(value(s), "splitlines");
  call_args none;
  auto lines = lines_v.callable().fn(none).items();
  std::uint64_t indented = 0;
  if (__builtin_mul_overflow(static_cast<std::uint64_t>(ind.size()),
                             static_cast<std::uint64_t>(lines.size()), &indented))
    indented = UINT64_MAX;
  charge_steps(indented);
  std::string rv;
  if (blank) {
    for (std::size_t i = 0; i < lines.size(); ++i)
      rv += (i ? "\n" + ind : "") + lines[i].as_string();
  } else {
    rv = lines.empty() ? "" : lines[0].as_string();
    for (std::size_t i = 1; i < lines.size(); ++i) {
      const std::string& l = lines[i].as_string();
      rv += "\n" + (l.empty() ? l : ind + l);
    }
  }
  if (first) rv = ind + rv;
  return rv;
}

value f_batch(interpreter&, const value& v, call_args& a) {
  std::int64_t count = to_int(argument(a, 0, "linecount"), "linecount");
  if (count <= 0) throw template_error("batch: linecount must be positive");
  bool fill = has_argument(a, 1, "fill_with") && !argument(a, 1, "fill_with").is_none();
  value filler = fill ? argument(a, 1, "fill_with") : value();
  std::vector<value> out;
  std::vector<value> cur;
  for (auto& e : iterate(v)) {
    cur.push_back(e);
    if (static_cast<std::int64_t>(cur.size()) == count) {
      out.push_back(value::make_list(std::move(cur)));
      cur.clear();
    }
  }
  if (!cur.empty()) {
    if (fill)
      while (static_cast<std::int64_t>(cur.size()) < count) cur.push_back(filler);
    out.push_back(value::make_list(std::move(cur)));
  }
  return value::make_list(std::move(out));
}

value f_slice(interpreter&, const value& v, call_args& a) {
  std::int64_t slices = to_int(argument(a, 0, "slices"), "slices");
  if (slices <= 0) throw template_error("slice: slices must be positive");
  bool fill = has_argument(a, 1, "fill_with") && !argument(a, 1, "fill_with").is_none();
  value filler = fill ? argument(a, 1, "fill_with") : value();
  auto seq = iterate(v);
  auto length = static_cast<std::int64_t>(seq.size());
  std::int64_t per = length / slices;
  std::int64_t extra = length % slices;
  std::int64_t offset = 0;
  std::vector<value> out;
  for (std::int64_t n = 0; n < slices; ++n) {
    std::int64_t start = offset + n * per;
    if (n < extra) ++offset;
    std::int64_t end = offset + (n + 1) * per;
    std::vector<value> part(seq.begin() + start, seq.begin() + end);
    if (fill && n >= extra) part.push_back(filler);
    out.push_back(value::make_list(std::move(part)));
  }
  return value::make_list(std::move(out));
}

// Jinja's htmlsafe_json_dumps with its json.dumps_kwargs policy (sort_keys).
value f_tojson(interpreter&, const value& v, call_args& a) {
  json_dumps_options o;
  o.sort_keys = true;
  o.html_safe = true;
  o.indent = json_indent(argument(a, 0, "indent", nullptr));
  return python_json_dumps(v, o);
}

value f_format(interpreter&, const value& v, call_args& a) {
  if (!a.positional.empty() && !a.keyword.empty())
    throw template_error("can't handle positional and keyword arguments at the same time");
  if (!a.keyword.empty()) {
    value d = value::make_dict();
    for (auto& [k, e] : a.keyword) d.dict().set(value(k), e);
    return percent_format(v.str(), d);
  }
  return percent_format(v.str(), value::make_tuple(a.positional));
}

value f_wordcount(interpreter&, const value& v, call_args&) {
  std::string s = v.str();
  std::int64_t n = 0;
  bool in_word = false;
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    bool w = std::isalnum(u) || c == '_' || u >= 0x80;
    if (w && !in_word) ++n;
    in_word = w;
  }
  return n;
}

value f_center(interpreter&, const value& v, call_args& a) {
  value m = method(value(v.str()), "center");
  call_args b;
  b.positional.push_back(argument(a, 0, "width", 80));
  return m.callable().fn(b);
}

value f_truncate(interpreter&, const value& v, call_args& a) {
  v.defined();
  std::int64_t length = to_int(argument(a, 0, "length", 255), "length");
  bool killwords = argument(a, 1, "killwords", false).truthy();
  std::string end = argument(a, 2, "end", "...").str();
  value leeway_v = argument(a, 3, "leeway", nullptr);
  std::int64_t leeway = leeway_v.is_none() ? 5 : to_int(leeway_v, "leeway");
  std::vector<value> chars = v.is_string() ? iterate(v) : std::vector<value>{};
  auto n = static_cast<std::int64_t>(chars.size());
  auto elen = static_cast<std::int64_t>(base::python_len(end));
  if (length < elen)
    throw template_error("expected length >= " + std::to_string(elen) + ", got " +
                         std::to_string(length));
  if (leeway < 0) throw template_error("expected leeway >= 0, got " + std::to_string(leeway));
  // Jinja takes len() of the value and slices it: a list, tuple or dict
  // short enough comes back as it is, a longer one fails on the slice.
  if (!v.is_string()) {
    if (!v.is_sequence_like() && !v.is_dict())
      throw template_error("object of type '" + type_name(v) + "' has no len()");
    auto len = static_cast<std::int64_t>(v.is_dict() ? v.dict().entries.size() : v.items().size());
    if (len <= length + leeway) return v;
    if (v.is_dict()) throw template_error("unhashable type: 'slice'");
    if (killwords)
      throw template_error("can only concatenate " + type_name(v) + " (not \"str\") to " +
                           type_name(v));
    throw template_error("'" + type_name(v) + "' object has no attribute 'rsplit'");
  }
  const std::string& s = v.as_string();
  if (n <= length + leeway) return s;
  std::string head;
  for (std::int64_t i = 0; i < length - elen; ++i)
    head += chars[static_cast<std::size_t>(i)].as_string();
  if (killwords) return head + end;
  auto sp = head.rfind(' ');
  if (sp != std::string::npos) head.resize(sp);
  return head + end;
}

value f_escape(interpreter&, const value& v, call_args&) {
  std::string out;
  for (char c : v.str()) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

value f_safe(interpreter&, const value& v, call_args&) { return v.defined(); }

value f_attr(interpreter& in, const value& v, call_args& a) {
  return in.getattr(v, argument(a, 0, "name").str());
}

// Jinja's wordwrap: textwrap.wrap per line (existing line breaks are
// paragraphs), joined with wrapstring.
value f_wordwrap(interpreter&, const value& v, call_args& a) {
  std::string s = v.str();
  std::int64_t width = to_int(argument(a, 0, "width", 79), "width");
  if (width <= 0) throw template_error("invalid width " + std::to_string(width) + " (must be > 0)");
  bool break_long = argument(a, 1, "break_long_words", true).truthy();
  value wrap_v = argument(a, 2, "wrapstring", nullptr);
  std::string wrapstring = wrap_v.is_none() ? "\n" : wrap_v.str();
  bool break_on_hyphens = argument(a, 3, "break_on_hyphens", true).truthy();
  value lines_v = method(value(s), "splitlines");
  call_args none;
  value lines = lines_v.callable().fn(none);
  std::string rv;
  bool first_paragraph = true;
  for (const auto& l : lines.items()) {
    if (!first_paragraph) rv += wrapstring;
    first_paragraph = false;
    bool first = true;
    for (const auto& w :
         textwrap(l.as_string(), static_cast<std::size_t>(width), break_long, break_on_hyphens)) {
      if (!first) rv += wrapstring;
      first = false;
      rv += w;
    }
  }
  return rv;
}

value f_xmlattr(interpreter& in, const value& v, call_args& a) {
  bool autospace = argument(a, 0, "autospace", true).truthy();
  v.defined();
  if (!v.is_dict()) throw template_error("xmlattr: expected a mapping, got " + type_name(v));
  std::string rv;
  call_args none;
  for (const auto& [k, e] : v.dict().entries) {
    if (e.is_none() || e.is_undefined()) continue;
    std::string key = k.str();
    if (key.find_first_of(" \t\n\f\r/>=") != std::string::npos) {
      throw template_error("Invalid character in attribute name: " + string_repr(key));
    }
    if (!rv.empty()) rv += " ";
    rv += f_escape(in, value(key), none).as_string() + "=\"" + f_escape(in, e, none).as_string() +
          "\"";
  }
  if (autospace && !rv.empty()) rv = " " + rv;
  return rv;
}

// Markup.striptags: comments and tags removed, whitespace runs made one
// space, then HTML entities unescaped (the common named ones and numeric).
value f_striptags(interpreter&, const value& v, call_args&) {
  std::string s = v.str();
  std::string out;
  for (std::size_t i = 0; i < s.size();) {
    if (s.compare(i, 4, "<!--") == 0) {
      auto e = s.find("-->", i + 4);
      if (e != std::string::npos) {
        i = e + 3;
        continue;
      }
    }
    if (s[i] == '<') {
      auto e = s.find('>', i + 1);
      if (e != std::string::npos) {
        i = e + 1;
        continue;
      }
    }
    out += s[i++];
  }
  std::string words;
  std::size_t i = 0;
  while (i < out.size()) {
    while (i < out.size() && std::isspace(static_cast<unsigned char>(out[i]))) ++i;
    std::size_t j = i;
    while (j < out.size() && !std::isspace(static_cast<unsigned char>(out[j]))) ++j;
    if (j > i) words += (words.empty() ? "" : " ") + out.substr(i, j - i);
    i = j;
  }
  static const std::vector<std::pair<std::string, std::string>> k_entities = {
      {"&amp;", "&"},
      {"&lt;", "<"},
      {"&gt;", ">"},
      {"&quot;", "\""},
      {"&apos;", "'"},
      {"&nbsp;", "\xc2\xa0"},
      {"&copy;", "\xc2\xa9"},
      {"&reg;", "\xc2\xae"},
      {"&mdash;", "\xe2\x80\x94"},
      {"&ndash;", "\xe2\x80\x93"},
      {"&hellip;", "\xe2\x80\xa6"}};
  std::string rv;
  for (std::size_t k = 0; k < words.size();) {
    bool hit = false;
    if (words[k] == '&' && k + 2 < words.size() && words[k + 1] == '#') {
      // A numeric reference, decimal or hex, as html.unescape reads it.
      bool hex = words[k + 2] == 'x' || words[k + 2] == 'X';
      std::size_t d = k + (hex ? 3 : 2);
      std::size_t e = d;
      while (e < words.size() && e - d < 8 &&
             (hex ? std::isxdigit(static_cast<unsigned char>(words[e]))
                  : std::isdigit(static_cast<unsigned char>(words[e]))))
        ++e;
      if (e > d) {
        unsigned long cp = std::stoul(words.substr(d, e - d), nullptr, hex ? 16 : 10);
        if (cp == 0 || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) cp = 0xfffd;
        std::string u;
        base::append_utf8(u, static_cast<char32_t>(cp));
        rv += u;
        k = e < words.size() && words[e] == ';' ? e + 1 : e;
        continue;
      }
    }
    if (words[k] == '&') {
      for (const auto& [from, to] : k_entities) {
        if (words.compare(k, from.size(), from) == 0) {
          rv += to;
          k += from.size();
          hit = true;
          break;
        }
      }
    }
    if (!hit) rv += words[k++];
  }
  return rv;
}

value f_filesizeformat(interpreter&, const value& v, call_args& a) {
  bool binary = argument(a, 0, "binary", false).truthy();
  v.defined();
  double bytes = 0;
  if (v.is_number()) {
    bytes = v.to_double();
  } else if (v.is_string()) {
    char* end = nullptr;
    bytes = std::strtod(v.as_string().c_str(), &end);
    if (v.as_string().empty() || *end != '\0')
      throw template_error("could not convert string to float: " + v.repr());
  } else {
    throw template_error("float() argument must be a string or a real number, not '" +
                         type_name(v) + "'");
  }
  double base = binary ? 1024 : 1000;
  static const char* k_binary[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"};
  static const char* k_decimal[] = {"kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"};
  if (bytes == 1) return "1 Byte";
  if (bytes < base) return std::to_string(static_cast<std::int64_t>(bytes)) + " Bytes";
  double unit = base;
  const char* prefix = "";
  for (int i = 0; i < 8; ++i) {
    unit = std::pow(base, i + 2);
    prefix = binary ? k_binary[i] : k_decimal[i];
    if (bytes < unit) break;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f %s", base * bytes / unit, prefix);
  return std::string(buf);
}

value f_pprint(interpreter&, const value& v, call_args&) { return python_pformat(v); }

value f_urlize(interpreter&, const value&, call_args&) {
  throw template_error("filter 'urlize' is not supported by brine yet");
}

bool t_defined(interpreter&, const value& v, call_args&) { return !v.is_undefined(); }
// No value is Markup in brine, so nothing is already escaped.
bool t_escaped(interpreter&, const value& v, call_args&) { return v.defined(), false; }
bool t_undefined(interpreter&, const value& v, call_args&) { return v.is_undefined(); }
bool t_none(interpreter&, const value& v, call_args&) { return v.is_none(); }
bool t_string(interpreter&, const value& v, call_args&) { return v.is_string(); }
bool t_number(interpreter&, const value& v, call_args&) { return v.is_number(); }
bool t_integer(interpreter&, const value& v, call_args&) { return v.is_int(); }
bool t_float(interpreter&, const value& v, call_args&) { return v.is_float(); }
bool t_mapping(interpreter&, const value& v, call_args&) { return v.is_dict(); }
bool t_sequence(interpreter&, const value& v, call_args&) {
  return v.is_sequence_like() || v.is_string() || v.is_dict();
}
bool t_iterable(interpreter&, const value& v, call_args&) {
  return v.is_sequence_like() || v.is_string() || v.is_dict();
}
bool t_boolean(interpreter&, const value& v, call_args&) { return v.is_bool(); }
bool t_true(interpreter&, const value& v, call_args&) { return v.is_bool() && v.as_bool(); }
bool t_false(interpreter&, const value& v, call_args&) { return v.is_bool() && !v.as_bool(); }
bool t_callable(interpreter&, const value& v, call_args&) { return v.is_callable(); }
// Jinja: `value % 2 == 0`, `value % 2 == 1`, `value % num == 0`, so a
// float is odd or even only when it is a whole number (1.5 is neither).
bool t_even(interpreter&, const value& v, call_args&) {
  return equal(binary_op("%", v, value(2)), value(0));
}
bool t_odd(interpreter&, const value& v, call_args&) {
  return equal(binary_op("%", v, value(2)), value(1));
}
bool t_divisibleby(interpreter&, const value& v, call_args& a) {
  return equal(binary_op("%", v, argument(a, 0, "num")), value(0));
}
bool t_in(interpreter&, const value& v, call_args& a) { return contains(argument(a, 0, "seq"), v); }
bool t_eq(interpreter&, const value& v, call_args& a) { return equal(v, argument(a, 0, "other")); }
bool t_ne(interpreter&, const value& v, call_args& a) { return !equal(v, argument(a, 0, "other")); }
bool t_lt(interpreter&, const value& v, call_args& a) { return less(v, argument(a, 0, "other")); }
bool t_gt(interpreter&, const value& v, call_args& a) { return less(argument(a, 0, "other"), v); }
bool t_le(interpreter&, const value& v, call_args& a) {
  value o = argument(a, 0, "other");
  return less(v, o) || equal(v, o);
}
bool t_ge(interpreter&, const value& v, call_args& a) {
  value o = argument(a, 0, "other");
  return less(o, v) || equal(v, o);
}
bool t_sameas(interpreter&, const value& v, call_args& a) {
  value o = argument(a, 0, "other");
  if (v.identity() || o.identity()) return v.identity() == o.identity();
  if (v.type() != o.type()) return false;
  // CPython shares None, booleans, small ints and short strings.
  return equal(v, o);
}
bool t_lower(interpreter&, const value& v, call_args&) {
  call_args none;
  return method(value(v.str()), "islower").callable().fn(none).truthy();
}
bool t_upper(interpreter&, const value& v, call_args&) {
  call_args none;
  return method(value(v.str()), "isupper").callable().fn(none).truthy();
}

value g_range(call_args& a) {
  std::vector<std::int64_t> n;
  for (auto& p : a.positional) n.push_back(to_int(p, "range"));
  std::int64_t start = 0;
  std::int64_t stop = 0;
  std::int64_t step = 1;
  if (n.size() == 1) {
    stop = n[0];
  } else if (n.size() == 2 || n.size() == 3) {
    start = n[0];
    stop = n[1];
    if (n.size() == 3) step = n[2];
  } else {
    throw template_error("range expected 1 to 3 arguments, got " + std::to_string(n.size()));
  }
  if (step == 0) throw template_error("range() arg 3 must not be zero");
  std::vector<value> out;
  for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    out.emplace_back(i);
    if (out.size() > 100000)
      throw template_error(
          "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  }
  value l = value::make_list(std::move(out));
  l.list().repr_override = "range(" + std::to_string(start) + ", " + std::to_string(stop) +
                           (step != 1 ? ", " + std::to_string(step) : "") + ")";
  return l;
}

value g_dict(call_args& a) {
  value d = value::make_dict();
  if (!a.positional.empty()) {
    const value& src = a.positional[0].defined();
    if (src.is_dict()) {
      d.dict().entries = src.dict().entries;
    } else {
      for (auto& p : iterate(src)) {
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

value g_namespace(call_args& a) {
  value d = g_dict(a);
  value ns = value::make_namespace();
  ns.dict().entries = d.dict().entries;
  return ns;
}

}  // namespace

const std::map<std::string, filter_fn>& builtin_filters() {
  static const fmap filters = {
      {"abs", f_abs},
      {"attr", f_attr},
      {"batch", f_batch},
      {"capitalize", f_capitalize},
      {"center", f_center},
      {"count", f_length},
      {"d", f_default},
      {"default", f_default},
      {"dictsort", f_dictsort},
      {"e", f_escape},
      {"escape", f_escape},
      {"filesizeformat", f_filesizeformat},
      {"first", f_first},
      {"forceescape", f_escape},
      {"float", f_float},
      {"groupby", f_groupby},
      {"urlencode", f_urlencode},
      {"urlize", f_urlize},
      {"format", f_format},
      {"indent", f_indent},
      {"int", f_int},
      {"items", f_items},
      {"join", f_join},
      {"last", f_last},
      {"length", f_length},
      {"list", f_list},
      {"lower", f_lower},
      {"map", f_map},
      {"max", f_max},
      {"min", f_min},
      {"pprint", f_pprint},
      {"random", jinja_random},
      {"reject", f_reject},
      {"rejectattr", f_rejectattr},
      {"replace", f_replace},
      {"reverse", f_reverse},
      {"round", f_round},
      {"safe", f_safe},
      {"select", f_select},
      {"selectattr", f_selectattr},
      {"slice", f_slice},
      {"sort", f_sort},
      {"string", f_string},
      {"striptags", f_striptags},
      {"sum", f_sum},
      {"title", f_title},
      {"tojson", f_tojson},
      {"trim", f_trim},
      {"truncate", f_truncate},
      {"unique", f_unique},
      {"upper", f_upper},
      {"wordcount", f_wordcount},
      {"wordwrap", f_wordwrap},
      {"xmlattr", f_xmlattr},
  };
  // Salt's filters are always on, as in Salt; Jinja's keep their names.
  static const fmap merged = [] {
    fmap m = filters;
    m.insert(salt_filters().begin(), salt_filters().end());
    return m;
  }();
  return merged;
}

const std::map<std::string, test_fn>& builtin_tests() {
  static const tmap tests = {
      {"defined", t_defined},
      {"undefined", t_undefined},
      {"none", t_none},
      {"string", t_string},
      {"number", t_number},
      {"integer", t_integer},
      {"float", t_float},
      {"mapping", t_mapping},
      {"sequence", t_sequence},
      {"iterable", t_iterable},
      {"boolean", t_boolean},
      {"true", t_true},
      {"false", t_false},
      {"callable", t_callable},
      {"even", t_even},
      {"odd", t_odd},
      {"divisibleby", t_divisibleby},
      {"in", t_in},
      {"eq", t_eq},
      {"==", t_eq},
      {"equalto", t_eq},
      {"ne", t_ne},
      {"!=", t_ne},
      {"lt", t_lt},
      {"<", t_lt},
      {"lessthan", t_lt},
      {"gt", t_gt},
      {">", t_gt},
      {"greaterthan", t_gt},
      {"le", t_le},
      {"<=", t_le},
      {"ge", t_ge},
      {">=", t_ge},
      {"sameas", t_sameas},
      {"lower", t_lower},
      {"upper", t_upper},
      {"escaped", t_escaped},
  };
  static const tmap merged = [] {
    tmap m = tests;
    m.insert(salt_tests().begin(), salt_tests().end());
    return m;
  }();
  return merged;
}

value builtin_global(const std::string& name) {
  if (name == "range") return value::make_callable("range", g_range);
  if (name == "dict") return value::make_callable("dict", g_dict);
  if (name == "namespace") return value::make_callable("namespace", g_namespace);
  return salt_global(name);
}

}  // namespace brine::render::detail
