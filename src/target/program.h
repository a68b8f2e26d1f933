#pragma once

// Internal to brine_target: a parsed target as a tree of boolean nodes over
// compiled terms.

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "target/matchers.h"
#include "target/target.h"

namespace brine::target {

namespace detail {

struct glob_term {
  glob pattern;  // on the id, case-sensitive (Python's fnmatch.filter on POSIX)
};
struct pcre_term {
  regex pattern;  // on the id, re.match
};
struct list_term {
  std::vector<std::string> ids;  // sorted, unique
};
struct data_term {
  bool pillar = false;  // else grains
  subdict_matcher matcher;
  // The top-level key it reads (the text before the first delimiter);
  // empty when it may read any (`*:...`).
  std::string top_key;
};
struct cidr_term {
  cidr_matcher matcher;
};
using term = std::variant<glob_term, pcre_term, list_term, data_term, cidr_term>;

struct node {
  enum class op : uint8_t { term, and_, or_, not_ } kind = op::term;
  uint32_t a = 0;  // term: index into terms; else the (first) operand node
  uint32_t b = 0;  // and/or: the second operand node
};

// Builds one term from its pattern, as a type of its own or as the part after
// X@ in a compound. Throws std::invalid_argument with the reason (without the
// pattern or its position, which the caller knows).
term make_term(type t, std::string_view pattern, char delimiter);

// The ids of a list target: "a,b" (spaces dropped, empty items skipped, as
// Salt's CLI does), "a b" (no comma: whitespace-separated) or a JSON list.
std::vector<std::string> parse_id_list(std::string_view text);

// Parses `text` of type compound or nodegroup (`text` is then the group's
// name) into `p`, returning the root node. Throws target::error.
uint32_t parse_compound(expression::program& p, std::string_view text, type t,
                        const nodegroups& groups);

}  // namespace detail

struct expression::program {
  std::string text;
  type kind = type::glob;
  std::vector<detail::term> terms;
  std::vector<detail::node> nodes;
  uint32_t root = 0;
  bool uses_grains = false;
  bool uses_pillar = false;
  // Top-level grain keys read, sorted, unique; all_grains: any may be.
  std::vector<std::string> grain_keys;
  bool all_grains = false;
  // Ids of the list terms that are not right after a `not`, sorted, unique.
  std::vector<std::string> listed;

  uint32_t add_term(detail::term t);
  uint32_t add_node(detail::node n);
  bool eval(uint32_t n, std::string_view id, const minion_data& d, bool greedy) const;
};

}  // namespace brine::target
