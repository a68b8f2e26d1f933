#pragma once

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/error.h"
#include "packed/packed.h"

// Salt's targeting (3006): which accepted minions a target expression names,
// resolved on the master against its minion data cache (grains, pillar).
namespace brine::target {

// Salt's tgt_type values.
enum class type {
  glob,
  pcre,
  list,
  grain,
  grain_pcre,
  pillar,
  pillar_pcre,
  ipcidr,
  nodegroup,
  compound
};

// "glob", "pcre", … as Salt spells them; nullopt for anything else.
std::optional<type> parse_type(std::string_view name);
std::string_view type_name(type t);

// A malformed target: the message names the expression, the offending word
// and its position, e.g.
//   target 'G@os:Debian and and L@a': expected a target after 'and' at word 3
// word() is that position (1-based; 0 when the whole expression is at fault).
class error : public base::error {
 public:
  error(const std::string& message, size_t word) : base::error(message), word_(word) {}
  size_t word() const { return word_; }

 private:
  size_t word_;
};

// One nodegroup of the master config: a compound expression (split on
// whitespace), or a list of words, each element one word (Salt's YAML-list
// form). Words with no operator between them that are all plain minion ids
// are a list of ids (Salt: "L@a,b").
using nodegroup = std::variant<std::string, std::vector<std::string>>;
using nodegroups = std::map<std::string, nodegroup, std::less<>>;

// The master config's `nodegroups` value: a map of name to string or list of
// strings, or (Salt 2017.7) a list of one-entry maps. Throws base::error
// naming the bad entry.
nodegroups nodegroups_from_json(const nlohmann::json& value);

// What the master's cache holds for one minion, packed (see src/packed);
// absent: nothing cached (the minion never sent it, or it was dropped). Salt
// caches grains and pillar in one entry; here each is cached or not on its
// own.
struct minion_data {
  packed::value grains;
  packed::value pillar;
};

// The accepted minions and their cached data, as the master sees them at one
// moment. A visitor rather than ids() + data(id): a master with 100k minions
// walks its own storage once, with no copy of the ids and no lookup per id.
class cache_view {
 public:
  using visitor = std::function<void(const std::string& id, const minion_data& data)>;
  virtual ~cache_view() = default;
  // Calls `fn` once for every accepted minion, in any order. The id and the
  // data need only live until `fn` returns.
  virtual void for_each(const visitor& fn) const = 0;
};

struct match_result {
  std::vector<std::string> minions;  // targeted accepted minions, sorted
  // Of expression::listed(), the ids that are not accepted minions (Salt's
  // "missing": the CLI reports them as not returning).
  std::vector<std::string> missing;
};

class expression;

// The accepted minions `e` targets. `greedy` (Salt's default for a publish:
// true) decides for minions whose data is not cached, as in
// expression::matches().
match_result match(const expression& e, const cache_view& cache, bool greedy = true);

// A parsed target: regexes compiled, nodegroups expanded, ready to be matched
// against many minions (parse once, match many). Immutable; copies share
// their state; safe to match from any number of threads at once.
class expression {
 public:
  // Throws target::error. `groups`: the master's nodegroups, for N@ and
  // type::nodegroup; they are expanded now and not kept. `delimiter`: the
  // key separator of type::grain/grain_pcre/pillar/pillar_pcre (Salt's
  // --delimiter); compound terms choose theirs per term (G%@a%b).
  static expression parse(std::string_view text, type t, const nodegroups& groups = {},
                          char delimiter = ':');

  // Whether minion `id` with cached `data` is targeted. A grain, pillar or
  // ipcidr term of a minion whose grains (pillar) are not cached is true
  // when `greedy` and false otherwise; see README.md. A minion matching its
  // own target passes its own grains and pillar.
  bool matches(std::string_view id, const minion_data& data, bool greedy) const;
  // The same over a minion's own grains and pillar as trees (null: none),
  // packed here as far as the expression reads them.
  struct tree_data {
    const nlohmann::json* grains = nullptr;
    const nlohmann::json* pillar = nullptr;
  };
  bool matches(std::string_view id, const tree_data& data, bool greedy) const;

  const std::string& text() const;
  type kind() const;
  // Whether matching reads grains (G@ P@ S@) or pillar (I@ J@) at all.
  bool uses_grains() const;
  bool uses_pillar() const;
  // The top-level grain keys matching reads, sorted; nullopt when it may
  // read any (a `*:` term). Grains holding only these keys match as the
  // whole grains do, so a reader of a store need fetch no more.
  std::optional<std::vector<std::string>> grain_keys() const;
  // Ids named by its list terms (type::list, L@, a nodegroup of ids), sorted;
  // as Salt, not those of a list right after `not`.
  const std::vector<std::string>& listed() const;

  struct program;  // internal

 private:
  friend match_result match(const expression&, const cache_view&, bool);
  explicit expression(std::shared_ptr<const program> p) : p_(std::move(p)) {}
  std::shared_ptr<const program> p_;
};

}  // namespace brine::target
