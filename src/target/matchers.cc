#include "target/matchers.h"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <map>
#include <stdexcept>

#include "base/python.h"

namespace brine::target::detail {
namespace {

char32_t fold(char32_t c) { return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c; }

char fold_byte(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + ('a' - 'A')) : c; }

// The code point at s[i], advancing i; a byte that does not start a valid
// UTF-8 sequence stands for itself.
char32_t next_code_point(std::string_view s, size_t& i) {
  auto c = static_cast<unsigned char>(s[i]);
  size_t len = c >= 0xF0 && c < 0xF8   ? 4
               : c >= 0xE0 && c < 0xF0 ? 3
               : c >= 0xC0 && c < 0xE0 ? 2
                                       : 1;
  if (len == 1 || i + len > s.size()) {
    ++i;
    return c;
  }
  char32_t cp = c & (0x3F >> (len - 1));
  for (size_t k = 1; k < len; ++k) {
    auto cc = static_cast<unsigned char>(s[i + k]);
    if ((cc & 0xC0) != 0x80) {
      ++i;
      return c;
    }
    cp = (cp << 6) | (cc & 0x3F);
  }
  i += len;
  return cp;
}

std::string ascii_lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), fold_byte);
  return out;
}

// Salt lowercases a grain regex before compiling it; lowercasing the letter
// of an escape would turn \D into \d, so those stay as written.
std::string lower_except_escapes(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      out += s[i];
      out += s[++i];
    } else {
      out += fold_byte(s[i]);
    }
  }
  return out;
}

// The few Python spellings std::regex (ECMAScript) lacks: \A and \Z, named
// groups (?P<name>…) (kept as numbered groups), a leading (?i).
std::string from_python_regex(std::string_view s, bool& icase) {
  icase = false;
  if (s.starts_with("(?i)")) {
    icase = true;
    s.remove_prefix(4);
  }
  std::string out;
  out.reserve(s.size());
  bool in_class = false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '\\' && i + 1 < s.size()) {
      char e = s[++i];
      if (!in_class && e == 'A') {
        out += '^';
      } else if (!in_class && e == 'Z') {
        out += '$';
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (in_class) {
      in_class = c != ']';
    } else if (c == '[') {
      out += c;
      in_class = true;
      if (i + 1 < s.size() && s[i + 1] == '^') out += s[++i];
      if (i + 1 < s.size() && s[i + 1] == ']') {  // a leading ] is a member in Python
        out += "\\]";
        ++i;
      }
      continue;
    } else if (s.substr(i).starts_with("(?P<")) {
      size_t close = s.find('>', i);
      if (close != std::string_view::npos) {
        out += '(';
        i = close;
        continue;
      }
    }
    out += c;
  }
  return out;
}

std::optional<int64_t> python_int(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return std::nullopt;
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

std::vector<std::string> split(std::string_view s, char delimiter) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t at = s.find(delimiter, start);
    if (at == std::string_view::npos) {
      parts.emplace_back(s.substr(start));
      return parts;
    }
    parts.emplace_back(s.substr(start, at - start));
    start = at + 1;
  }
}

std::string join(const std::vector<std::string>& parts, size_t from, size_t to, char delimiter) {
  std::string out;
  for (size_t i = from; i < to; ++i) {
    if (i > from) out += delimiter;
    out += parts[i];
  }
  return out;
}

void python_repr(packed::value v, std::string& out, bool top) {
  switch (v.type()) {
    case packed::kind::null:
      out += "None";
      return;
    case packed::kind::boolean:
      out += v.boolean() ? "True" : "False";
      return;
    case packed::kind::string:
      if (top) {
        out += v.string();
      } else {
        base::append_python_repr(v.string(), out);
      }
      return;
    case packed::kind::array: {
      out += '[';
      bool first = true;
      for (packed::value e : v) {
        if (!first) out += ", ";
        first = false;
        python_repr(e, out, false);
      }
      out += ']';
      return;
    }
    case packed::kind::object: {
      out += '{';
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (!first) out += ", ";
        first = false;
        base::append_python_repr(it.key(), out);
        out += ": ";
        python_repr(*it, out, false);
      }
      out += '}';
      return;
    }
    default:  // numbers: the shortest round-trip form, as Python's repr
      out += v.to_json().dump();
      return;
  }
}

}  // namespace

std::string python_str(packed::value v) {
  std::string out;
  python_repr(v, out, true);
  return out;
}

std::string python_str(const nlohmann::json& v) { return python_str(packed::document(v).root()); }

// --- glob

bool glob::char_set::contains(char32_t c) const {
  bool in = std::any_of(ranges.begin(), ranges.end(),
                        [c](const auto& r) { return r.first <= c && c <= r.second; });
  return in != negated;
}

glob::glob(std::string_view pattern, bool fold_case) : fold_(fold_case) {
  std::string lowered;
  if (fold_) {
    lowered = ascii_lower(pattern);
    pattern = lowered;
  }
  std::string literal;
  bool only_literals = true;
  size_t i = 0;
  const size_t n = pattern.size();
  while (i < n) {
    char c = pattern[i];
    if (c == '*') {
      ++i;
      if (tokens_.empty() || tokens_.back().kind != op::star) tokens_.push_back({op::star});
      continue;
    }
    if (c == '?') {
      ++i;
      tokens_.push_back({op::any});
      only_literals = false;
      continue;
    }
    if (c == '[') {
      size_t j = i + 1;
      if (j < n && pattern[j] == '!') ++j;
      if (j < n && pattern[j] == ']') ++j;
      while (j < n && pattern[j] != ']') ++j;
      if (j < n) {
        char_set set;
        size_t k = i + 1;
        if (pattern[k] == '!') {
          set.negated = true;
          ++k;
        }
        std::vector<char32_t> members;
        while (k < j) members.push_back(next_code_point(pattern, k));
        for (size_t m = 0; m < members.size();) {
          if (m + 2 < members.size() && members[m + 1] == '-') {
            // A reversed range is empty, as Python drops it.
            if (members[m] <= members[m + 2]) set.ranges.emplace_back(members[m], members[m + 2]);
            m += 3;
          } else {
            set.ranges.emplace_back(members[m], members[m]);
            ++m;
          }
        }
        tokens_.push_back({op::set, 0, static_cast<uint32_t>(sets_.size())});
        sets_.push_back(std::move(set));
        only_literals = false;
        i = j + 1;
        continue;
      }
      // No closing bracket: a literal '['.
    }
    size_t start = i;
    char32_t cp = next_code_point(pattern, i);
    tokens_.push_back({op::literal, cp});
    literal.append(pattern.substr(start, i - start));
  }
  size_t stars = std::count_if(tokens_.begin(), tokens_.end(),
                               [](const token& t) { return t.kind == op::star; });
  if (tokens_.size() == 1 && stars == 1) {
    shape_ = shape::everything;
  } else if (only_literals && stars == 0) {
    shape_ = shape::exact;
    literal_ = std::move(literal);
  } else if (only_literals && stars == 1 && tokens_.back().kind == op::star) {
    shape_ = shape::prefix;
    literal_ = std::move(literal);
  }
}

bool glob::token_matches(const token& t, char32_t c) const {
  switch (t.kind) {
    case op::literal:
      return t.ch == c;
    case op::any:
      return true;
    case op::set:
      return sets_[t.set].contains(c);
    case op::star:
      break;
  }
  return false;
}

bool glob::matches(std::string_view text) const {
  auto same = [this](std::string_view a, std::string_view lit) {
    if (!fold_) return a == lit;
    for (size_t i = 0; i < a.size(); ++i) {
      if (fold_byte(a[i]) != lit[i]) return false;
    }
    return true;
  };
  switch (shape_) {
    case shape::everything:
      return true;
    case shape::exact:
      return text.size() == literal_.size() && same(text, literal_);
    case shape::prefix:
      return text.size() >= literal_.size() && same(text.substr(0, literal_.size()), literal_);
    case shape::general:
      break;
  }
  // Greedy with backtracking to the last star: linear for one star,
  // O(text × pattern) at worst.
  size_t ti = 0, si = 0;
  size_t star_t = SIZE_MAX, star_s = 0;
  const size_t n = tokens_.size();
  while (si < text.size()) {
    if (ti < n && tokens_[ti].kind == op::star) {
      star_t = ti++;
      star_s = si;
      continue;
    }
    if (ti < n) {
      size_t next = si;
      char32_t c = next_code_point(text, next);
      if (token_matches(tokens_[ti], fold_ ? fold(c) : c)) {
        ++ti;
        si = next;
        continue;
      }
    }
    if (star_t == SIZE_MAX) return false;
    ti = star_t + 1;
    next_code_point(text, star_s);
    si = star_s;
  }
  while (ti < n && tokens_[ti].kind == op::star) ++ti;
  return ti == n;
}

// --- regex

namespace {
std::regex compile_python(const std::string& pattern) {
  bool icase = false;
  std::string translated = from_python_regex(pattern, icase);
  auto flags = std::regex::ECMAScript;
  if (icase) flags |= std::regex::icase;
  return std::regex(translated, flags);
}
}  // namespace

regex::regex(const std::string& pattern) : re_(compile_python(pattern)) {}

bool regex::matches(std::string_view text) const {
  return std::regex_search(text.begin(), text.end(), re_, std::regex_constants::match_continuous);
}

// --- subdict_matcher

struct subdict_matcher::compiler {
  subdict_matcher& m;
  bool regex_values;
  std::map<std::pair<std::string, char>, uint32_t> subs;
  std::map<std::string, uint32_t> dicts;
  std::map<std::string, uint32_t> values;

  uint32_t sub_of(const std::string& expr, char delimiter) {
    auto key = std::make_pair(expr, delimiter);
    if (auto it = subs.find(key); it != subs.end()) return it->second;
    std::vector<std::string> splits = split(expr, delimiter);
    sub s;
    // Deepest key first: a:b:c tries a:b → c, then a → b:c.
    for (size_t idx = splits.size() - 1; idx >= 1; --idx) {
      attempt a;
      std::string matchstr;
      if (join(splits, 0, idx, delimiter) == "*") {
        a.whole = true;
        matchstr = expr;
      } else {
        matchstr = join(splits, idx, splits.size(), delimiter);
        for (size_t i = 0; i < idx; ++i) {
          a.path.push_back({splits[i], python_int(splits[i]), packed::key_hash(splits[i])});
        }
      }
      a.dict = dict_of(matchstr);
      a.value = value_of(matchstr);
      s.attempts.push_back(std::move(a));
    }
    auto id = static_cast<uint32_t>(m.subs_.size());
    m.subs_.push_back(std::move(s));
    subs.emplace(std::move(key), id);
    return id;
  }

  uint32_t dict_of(const std::string& pattern) {
    if (auto it = dicts.find(pattern); it != dicts.end()) return it->second;
    dict d;
    d.wildcard = pattern.starts_with("*:");
    d.key = d.wildcard ? pattern.substr(2) : pattern;
    d.any = d.key == "*";
    d.key_hash = packed::key_hash(d.key);
    // Salt's _dict_match recurses with the default delimiter, whatever the
    // target's own.
    d.sub = sub_of(d.key, ':');
    if (d.wildcard) {
      d.nested = dict_of(d.key);
      d.value = value_of(d.key);
    }
    auto id = static_cast<uint32_t>(m.dicts_.size());
    m.dicts_.push_back(std::move(d));
    dicts.emplace(pattern, id);
    return id;
  }

  uint32_t value_of(const std::string& pattern) {
    if (auto it = values.find(pattern); it != values.end()) return it->second;
    value v;
    if (regex_values) {
      try {
        v.re.emplace(lower_except_escapes(pattern));
      } catch (const std::regex_error& e) {
        v.error = e.what();
      }
    } else {
      v.g.emplace(pattern, true);
    }
    auto id = static_cast<uint32_t>(m.values_.size());
    m.values_.push_back(std::move(v));
    values.emplace(pattern, id);
    return id;
  }
};

subdict_matcher::subdict_matcher(std::string_view expr, char delimiter, bool regex_values) {
  compiler c{*this, regex_values, {}, {}, {}};
  std::string e(expr);
  if (e.find(delimiter) == std::string::npos) {
    defect_ = std::string("has no '") + delimiter + "' between a key and a value";
    return;
  }
  root_ = c.sub_of(e, delimiter);
  if (regex_values) {
    const auto& attempts = subs_[root_].attempts;
    bool any_valid = std::any_of(attempts.begin(), attempts.end(),
                                 [&](const attempt& a) { return values_[a.value].error.empty(); });
    if (!any_valid) {
      // The last attempt splits at the first delimiter: key, then the whole value.
      const attempt& a = attempts.back();
      std::string value = a.whole ? e : e.substr(e.find(delimiter) + 1);
      defect_ = "has a bad regular expression '" + value + "': " + values_[a.value].error;
    }
  }
}

bool subdict_matcher::value::matches(packed::value v) const {
  std::string owned;
  std::string_view text;
  char buf[24];
  if (v.is_string()) {
    text = v.string();
  } else if (v.type() == packed::kind::integer || v.type() == packed::kind::unsigned_integer) {
    // Python's str() of an int, without a string or a tree.
    auto [end, ec] = v.type() == packed::kind::integer
                         ? std::to_chars(buf, buf + sizeof buf, v.integer())
                         : std::to_chars(buf, buf + sizeof buf, v.unsigned_integer());
    text = std::string_view(buf, static_cast<size_t>(end - buf));
  } else if (v.is_boolean()) {
    text = v.boolean() ? "True" : "False";
  } else if (v.is_null()) {
    text = "None";
  } else {
    owned = python_str(v);
    text = owned;
  }
  if (g) return g->matches(text);
  if (!re) return false;
  thread_local std::string lowered;
  lowered.assign(text);
  std::transform(lowered.begin(), lowered.end(), lowered.begin(), fold_byte);
  return re->matches(lowered);
}

packed::value subdict_matcher::traverse(packed::value data, const std::vector<path_element>& path) {
  packed::value p = data;
  for (const auto& e : path) {
    if (p.is_array()) {
      if (!e.index) {
        // Not a number: the first dict of the list that has the key.
        packed::value found;
        for (packed::value member : p) {
          if (!member.is_object()) continue;
          if (packed::value v = member.find(e.key, e.hash)) {
            found = v;
            break;
          }
        }
        if (!found) return {};
        p = found;
      } else {
        auto size = static_cast<int64_t>(p.size());
        int64_t i = *e.index < 0 ? *e.index + size : *e.index;
        if (i < 0 || i >= size) return {};
        p = p.at(static_cast<size_t>(i));
      }
    } else if (p.is_object()) {
      p = p.find(e.key, e.hash);
      if (!p) return {};
    } else {
      return {};
    }
  }
  return p;
}

bool subdict_matcher::sub_matches(uint32_t s, packed::value data) const {
  for (const attempt& a : subs_[s].attempts) {
    packed::value m = a.whole ? data : traverse(data, a.path);
    if (!m) continue;
    if (m.is_object()) {
      if (!m.empty() && dict_matches(a.dict, m)) return true;
      continue;
    }
    if (m.is_array()) {
      for (packed::value member : m) {
        if (member.is_object() && dict_matches(a.dict, member)) return true;
        if (values_[a.value].matches(member)) return true;
      }
      continue;
    }
    if (values_[a.value].matches(m)) return true;
  }
  return false;
}

bool subdict_matcher::dict_matches(uint32_t di, packed::value target) const {
  const dict& d = dicts_[di];
  if (d.any) return true;
  if (target.find(d.key, d.key_hash)) return true;
  if (sub_matches(d.sub, target)) return true;
  if (!d.wildcard) return false;
  for (packed::value v : target) {
    if (v.is_object()) {
      if (dict_matches(d.nested, v)) return true;
    } else if (v.is_array()) {
      for (packed::value item : v) {
        if (values_[d.value].matches(item)) return true;
      }
    } else if (values_[d.value].matches(v)) {
      return true;
    }
  }
  return false;
}

bool subdict_matcher::matches(packed::value data) const {
  return root_ != npos && data && sub_matches(root_, data);
}

// --- cidr_matcher

namespace {

bool parse_ip(std::string_view text, bool v6, std::array<uint8_t, 16>& out) {
  char buf[INET6_ADDRSTRLEN + 1];
  if (text.empty() || text.size() >= sizeof buf) return false;
  std::memcpy(buf, text.data(), text.size());
  buf[text.size()] = '\0';
  out.fill(0);
  return ::inet_pton(v6 ? AF_INET6 : AF_INET, buf, out.data()) == 1;
}

// The prefix length of a contiguous IPv4 netmask (255.255.255.0) or hostmask
// (0.0.0.255), as Python's ip_network accepts them.
std::optional<unsigned> prefix_of_mask(const std::array<uint8_t, 16>& mask) {
  uint32_t m =
      (uint32_t{mask[0]} << 24) | (uint32_t{mask[1]} << 16) | (uint32_t{mask[2]} << 8) | mask[3];
  for (unsigned p = 0; p <= 32; ++p) {
    uint32_t net = p == 0 ? 0 : ~uint32_t{0} << (32 - p);
    if (m == net) return p;
  }
  for (unsigned p = 0; p <= 32; ++p) {
    uint32_t host = p == 32 ? 0 : ~uint32_t{0} >> p;
    if (m == host) return p;
  }
  return std::nullopt;
}

bool in_prefix(const std::array<uint8_t, 16>& a, const std::array<uint8_t, 16>& net,
               unsigned prefix) {
  unsigned full = prefix / 8;
  if (std::memcmp(a.data(), net.data(), full) != 0) return false;
  unsigned rest = prefix % 8;
  if (rest == 0) return true;
  auto mask = static_cast<uint8_t>(0xFF << (8 - rest));
  return (a[full] & mask) == (net[full] & mask);
}

}  // namespace

cidr_matcher::cidr_matcher(std::string_view text) {
  std::array<uint8_t, 16> addr{};
  size_t slash = text.find('/');
  std::string_view host = text.substr(0, slash);
  if (parse_ip(host, false, addr)) {
    v6_ = false;
  } else if (parse_ip(host, true, addr)) {
    v6_ = true;
  } else {
    throw std::invalid_argument("is not an IPv4 or IPv6 address or network");
  }
  const unsigned bits = v6_ ? 128 : 32;
  prefix_ = bits;
  if (slash != std::string_view::npos) {
    std::string_view p = text.substr(slash + 1);
    std::array<uint8_t, 16> mask{};
    unsigned value = 0;
    auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), value);
    if (!p.empty() && ec == std::errc() && end == p.data() + p.size() &&
        std::all_of(p.begin(), p.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      if (value > bits) {
        throw std::invalid_argument("has a prefix length above " + std::to_string(bits));
      }
      prefix_ = value;
    } else if (!v6_ && parse_ip(p, false, mask) && prefix_of_mask(mask)) {
      prefix_ = *prefix_of_mask(mask);
    } else {
      throw std::invalid_argument("has a bad prefix length '" + std::string(p) + "'");
    }
  }
  net_ = addr;
  for (unsigned b = prefix_; b < bits; ++b) {
    net_[b / 8] &= static_cast<uint8_t>(~(0x80 >> (b % 8)));
  }
  if (net_ != addr) {
    char buf[INET6_ADDRSTRLEN];
    ::inet_ntop(v6_ ? AF_INET6 : AF_INET, net_.data(), buf, sizeof buf);
    throw std::invalid_argument("has host bits set (the network is " + std::string(buf) + "/" +
                                std::to_string(prefix_) + ")");
  }
}

bool cidr_matcher::contains(std::string_view address) const {
  std::array<uint8_t, 16> a{};
  return parse_ip(address, v6_, a) && in_prefix(a, net_, prefix_);
}

bool cidr_matcher::matches(packed::value grains) const {
  packed::value ips = grains.find(v6_ ? "ipv6" : "ipv4");
  if (!ips) return false;
  if (ips.is_string()) return contains(ips.string());
  for (packed::value e : ips) {
    if (e.is_string() && contains(e.string())) return true;
  }
  return false;
}

}  // namespace brine::target::detail
