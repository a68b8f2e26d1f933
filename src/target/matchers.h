#pragma once

// Internal to brine_target: the matching primitives a parsed target is made
// of, each compiled once at parse time and free of allocation when matching
// (except where a regex needs a lowercased copy of a value, kept in a
// per-thread buffer).

#include <array>
#include <cstdint>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "packed/packed.h"

namespace brine::target::detail {

// Python's fnmatch.fnmatchcase: `*` any run (also of `/` and a leading `.`),
// `?` one character, `[seq]`, `[!seq]` with ranges, `[` without `]` literal,
// no backslash escapes; the whole text must match. Characters are UTF-8 code
// points. `fold_case`: ASCII case-insensitive (Salt lowercases both sides of
// a grain match).
class glob {
 public:
  glob(std::string_view pattern, bool fold_case);
  bool matches(std::string_view text) const;

 private:
  enum class op : uint8_t { literal, any, star, set };
  struct token {
    op kind;
    char32_t ch = 0;   // literal
    uint32_t set = 0;  // index into sets_
  };
  struct char_set {
    bool negated = false;
    std::vector<std::pair<char32_t, char32_t>> ranges;
    bool contains(char32_t c) const;
  };
  enum class shape : uint8_t { general, exact, prefix, everything };

  bool token_matches(const token& t, char32_t c) const;

  std::vector<token> tokens_;
  std::vector<char_set> sets_;
  bool fold_;
  shape shape_ = shape::general;
  std::string literal_;  // exact and prefix shapes (lowercased when folding)
};

// Python's re.match: anchored at the start, not at the end. ECMAScript
// syntax (std::regex); throws std::regex_error.
class regex {
 public:
  explicit regex(const std::string& pattern);
  bool matches(std::string_view text) const;

 private:
  std::regex re_;
};

// Salt's salt.utils.data.subdict_match on grains or pillar: `expr` is
// key[:key…]:value where the value is a glob (or a regex), the key path walks
// nested dicts and lists (a numeric element indexes a list, another one looks
// into the dicts of a list), a list matches when one member does, a dict
// matches a value that is one of its keys, `*:` before a pattern tries every
// entry of a dict one level down, and the delimiter may also occur inside the
// value: every split point is tried, deepest key first. Comparison is on the
// lowercased text of the value (Salt: str(value).lower()).
class subdict_matcher {
 public:
  subdict_matcher(std::string_view expr, char delimiter, bool regex_values);
  bool matches(packed::value data) const;

  // Why the expression can never match, or empty: no delimiter, or (regex)
  // no split of it leaves a value that compiles.
  const std::string& defect() const { return defect_; }

 private:
  static constexpr uint32_t npos = UINT32_MAX;
  struct path_element {
    std::string key;
    std::optional<int64_t> index;  // the key read as Python's int(), for lists
    uint32_t hash = 0;             // packed::key_hash(key)
  };
  // One split point: the key path, and the rest as a dict pattern and a value pattern.
  struct attempt {
    bool whole = false;  // the key is `*`: the whole data against the whole expression
    std::vector<path_element> path;
    uint32_t dict = npos;
    uint32_t value = npos;
  };
  struct sub {
    std::vector<attempt> attempts;
  };
  // Salt's _dict_match(target, pattern).
  struct dict {
    bool wildcard = false;   // the pattern began with "*:", now stripped
    bool any = false;        // the stripped pattern is "*"
    std::string key;         // the stripped pattern, as a key of the dict
    uint32_t key_hash = 0;
    uint32_t sub = npos;     // subdict_match(target, pattern) with ':'
    uint32_t nested = npos;  // wildcard: _dict_match(each dict value, pattern)
    uint32_t value = npos;   // wildcard: _match(each other value, pattern)
  };
  // Salt's _match(target, pattern): a glob or a regex, or never (a bad regex).
  struct value {
    std::optional<glob> g;
    std::optional<regex> re;
    std::string error;  // the regex did not compile
    bool matches(packed::value v) const;
  };

  struct compiler;
  bool sub_matches(uint32_t s, packed::value data) const;
  bool dict_matches(uint32_t d, packed::value target) const;
  static packed::value traverse(packed::value data, const std::vector<path_element>& path);

  std::vector<sub> subs_;
  std::vector<dict> dicts_;
  std::vector<value> values_;
  uint32_t root_ = npos;
  std::string defect_;
};

// An IPv4 or IPv6 address or network (Python's ipaddress.ip_address, else
// ip_network, strict: no host bits set), matched against a minion's `ipv4`
// or `ipv6` grain (a list of addresses).
class cidr_matcher {
 public:
  // Throws std::invalid_argument with the reason.
  explicit cidr_matcher(std::string_view text);
  bool matches(packed::value grains) const;

 private:
  bool contains(std::string_view address) const;
  bool v6_ = false;
  std::array<uint8_t, 16> net_{};
  unsigned prefix_ = 0;
};

// Python's str(value) of JSON data (None, True, 1.5, ['a', 'b'], {'k': 1}).
std::string python_str(packed::value v);
std::string python_str(const nlohmann::json& v);

}  // namespace brine::target::detail
