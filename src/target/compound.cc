// Compound targets and nodegroups: words, X@ prefixes, `and`/`or`/`not` with
// Python's precedence (not > and > or), parentheses, nodegroups expanded in
// place.

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <stdexcept>

#include "target/program.h"

namespace brine::target::detail {
namespace {

enum class tk : uint8_t { term, and_, or_, not_, lparen, rparen };

// Where tokens come from: the target itself, or a nodegroup's definition
// reached through an N@ word of its parent.
struct origin {
  std::string group;  // empty: the target itself
  size_t word_in_parent = 0;
  const origin* parent = nullptr;
};

struct token {
  tk kind = tk::term;
  std::string_view text;
  size_t word = 0;  // 1-based, in its origin
  const origin* from = nullptr;
};

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

std::optional<tk> operator_of(std::string_view w) {
  if (w == "and") return tk::and_;
  if (w == "or") return tk::or_;
  if (w == "not") return tk::not_;
  if (w == "(") return tk::lparen;
  if (w == ")") return tk::rparen;
  return std::nullopt;
}

// More closing than opening parentheses (outside backslash escapes): the
// last ')' closes a group rather than belonging to the pattern (E@web(1|2)).
bool closes_too_many(std::string_view w) {
  int depth = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i] == '\\') {
      ++i;
    } else if (w[i] == '(') {
      ++depth;
    } else if (w[i] == ')') {
      --depth;
    }
  }
  return depth < 0;
}

// Salt's words are split on whitespace and need spaces around parentheses;
// here a word's leading '(' and its unbalanced trailing ')' are split off as
// well, so "(G@os:Debian or web1)" reads as Salt's "( G@os:Debian or web1 )".
std::vector<token> tokenize(std::string_view text, const origin* from) {
  std::vector<token> out;
  size_t i = 0, word = 0;
  while (true) {
    while (i < text.size() && is_space(text[i])) ++i;
    if (i == text.size()) break;
    size_t start = i;
    while (i < text.size() && !is_space(text[i])) ++i;
    std::string_view w = text.substr(start, i - start);
    ++word;
    if (auto op = operator_of(w)) {
      out.push_back({*op, w, word, from});
      continue;
    }
    while (w.starts_with('(')) {
      out.push_back({tk::lparen, w.substr(0, 1), word, from});
      w.remove_prefix(1);
    }
    size_t closing = 0;
    while (w.ends_with(')') && closes_too_many(w)) {
      w.remove_suffix(1);
      ++closing;
    }
    if (!w.empty()) out.push_back({operator_of(w).value_or(tk::term), w, word, from});
    for (size_t k = 0; k < closing; ++k) out.push_back({tk::rparen, ")", word, from});
  }
  return out;
}

// The X@ prefix of a compound word (Salt's TARGET_REX): G@, or G%@ with an
// alternate delimiter for G, P, I and J.
struct prefix {
  char engine = 0;  // 0: a plain glob on the id
  char delimiter = 0;
  std::string_view pattern;
};

bool takes_delimiter(char c) { return c == 'G' || c == 'P' || c == 'I' || c == 'J'; }
bool is_engine(char c) { return c != 0 && std::strchr("GPIJLESNR", c) != nullptr; }

prefix split_prefix(std::string_view w) {
  if (w.size() >= 3 && w[2] == '@' && takes_delimiter(w[0])) return {w[0], w[1], w.substr(3)};
  if (w.size() >= 2 && w[1] == '@' && w[0] >= 'A' && w[0] <= 'Z') return {w[0], 0, w.substr(2)};
  if (w.size() >= 3 && w[2] == '@' && is_engine(w[0])) return {w[0], w[1], w.substr(3)};
  return {0, 0, w};
}

std::optional<type> engine_type(char e) {
  switch (e) {
    case 'G':
      return type::grain;
    case 'P':
      return type::grain_pcre;
    case 'I':
      return type::pillar;
    case 'J':
      return type::pillar_pcre;
    case 'L':
      return type::list;
    case 'E':
      return type::pcre;
    case 'S':
      return type::ipcidr;
    default:
      return std::nullopt;
  }
}

std::string in_quotes(std::string_view s) {
  std::string out = "'";
  out += s;
  out += '\'';
  return out;
}

class parser;

// State shared by the parsers of the target and of the nodegroups it names.
struct context {
  expression::program& p;
  const nodegroups& groups;
  std::string_view target;
  type kind;
  std::deque<origin> origins;                             // stable addresses for tokens
  std::map<std::string, uint32_t, std::less<>> expanded;  // nodegroup → its root node
  std::vector<std::string> stack;                         // nodegroups being expanded

  // The position of `t`, through the nodegroups that led to it.
  static std::string where(const token& t) {
    std::string s = "at word " + std::to_string(t.word);
    for (const origin* o = t.from; o->parent; o = o->parent) {
      s += " of nodegroup " + in_quotes(o->group) + ", named at word " +
           std::to_string(o->word_in_parent);
    }
    return s;
  }

  // The word of the target itself that `t` is, or comes from.
  static size_t top_word(const token& t) {
    size_t w = t.word;
    for (const origin* o = t.from; o->parent; o = o->parent) w = o->word_in_parent;
    return w;
  }

  [[noreturn]] void fail(const std::string& what, size_t word) const {
    std::string head = "target " + in_quotes(target);
    if (kind != type::compound) head += std::string(" (") + std::string(type_name(kind)) + ")";
    throw error(head + ": " + what, word);
  }
  [[noreturn]] void fail(const std::string& what, const token& t) const { fail(what, top_word(t)); }

  uint32_t term_node(const token& t);
  uint32_t nodegroup(std::string_view name, const token& at);
};

// Recursive descent over one token list (the target's, or one nodegroup's).
class parser {
 public:
  parser(context& c, std::vector<token> tokens, std::string end_name)
      : c_(c), toks_(std::move(tokens)), end_name_(std::move(end_name)) {}

  uint32_t parse() {
    uint32_t root = parse_or();
    if (pos_ < toks_.size()) {
      // parse_or stops only at a ')' it did not open.
      c_.fail("unmatched ')' " + context::where(toks_[pos_]), toks_[pos_]);
    }
    return root;
  }

 private:
  const token* peek() const { return pos_ < toks_.size() ? &toks_[pos_] : nullptr; }
  static bool starts_operand(const token* t) {
    return t && (t->kind == tk::term || t->kind == tk::not_ || t->kind == tk::lparen);
  }

  // After an operator (or '('), the next token must start an operand.
  void need_operand(const token& op) {
    const token* next = peek();
    if (starts_operand(next)) return;
    if (!next) {
      c_.fail("expected a target after " + in_quotes(op.text) + " " + context::where(op) + ", at " +
                  end_name_,
              op);
    }
    c_.fail("expected a target after " + in_quotes(op.text) + " " + context::where(*next) +
                ", got " + in_quotes(next->text),
            *next);
  }

  uint32_t binary(detail::node::op kind, uint32_t a, uint32_t b) {
    return c_.p.add_node({kind, a, b});
  }

  uint32_t parse_or() {
    uint32_t n = parse_and();
    while (const token* t = peek()) {
      if (t->kind != tk::or_) break;
      ++pos_;
      need_operand(*t);
      n = binary(node::op::or_, n, parse_and());
    }
    return n;
  }

  uint32_t parse_and() {
    uint32_t n = parse_not();
    while (const token* t = peek()) {
      if (t->kind == tk::and_) {
        ++pos_;
        need_operand(*t);
        n = binary(node::op::and_, n, parse_not());
      } else if (t->kind == tk::not_) {
        // Salt: `not` right after a target means `and not`.
        n = binary(node::op::and_, n, parse_not());
      } else if (t->kind == tk::term || t->kind == tk::lparen) {
        const token& prev = toks_[pos_ - 1];
        c_.fail("expected 'and' or 'or' between " + in_quotes(prev.text) + " and " +
                    in_quotes(t->text) + " " + context::where(*t),
                *t);
      } else {
        break;
      }
    }
    return n;
  }

  uint32_t parse_not() {
    const token* t = peek();
    if (t && t->kind == tk::not_) {
      ++pos_;
      need_operand(*t);
      return c_.p.add_node({node::op::not_, parse_not(), 0});
    }
    return parse_primary();
  }

  uint32_t parse_primary() {
    const token* t = peek();
    if (!t) {
      // Only an empty token list gets here: every operator checked its operand.
      c_.fail("empty expression", 0);
    }
    ++pos_;
    switch (t->kind) {
      case tk::term:
        return c_.term_node(*t);
      case tk::lparen: {
        need_operand(*t);
        uint32_t n = parse_or();
        const token* close = peek();
        if (!close) c_.fail(in_quotes("(") + " " + context::where(*t) + " is never closed", *t);
        ++pos_;  // parse_or stops only at ')' or the end
        return n;
      }
      case tk::rparen:
        c_.fail("unmatched ')' " + context::where(*t), *t);
      default:  // and, or: nothing before them
        c_.fail("expected a target before " + in_quotes(t->text) + " " + context::where(*t), *t);
    }
  }

  context& c_;
  std::vector<token> toks_;
  std::string end_name_;
  size_t pos_ = 0;
};

uint32_t context::term_node(const token& t) {
  prefix pre = split_prefix(t.text);
  auto bad = [&](const std::string& why) {
    fail(in_quotes(t.text) + " " + where(t) + " " + why, t);
  };
  if (pre.engine == 0)
    return p.add_node({node::op::term, p.add_term(glob_term{glob(t.text, false)})});
  if (pre.pattern.empty()) bad("has nothing after '@'");
  if (pre.engine == 'R') bad("is a range target (R@), which brine does not support");
  if (!is_engine(pre.engine)) {
    bad(std::string("has an unknown target type '") + pre.engine +
        "@' (known: G@ P@ I@ J@ L@ E@ S@ N@)");
  }
  if (pre.delimiter && !takes_delimiter(pre.engine)) {
    bad(std::string("gives a delimiter to ") + pre.engine +
        "@, but only G@, P@, I@ and J@ take one");
  }
  if (pre.engine == 'N') return nodegroup(pre.pattern, t);
  try {
    return p.add_node({node::op::term, p.add_term(make_term(*engine_type(pre.engine), pre.pattern,
                                                            pre.delimiter ? pre.delimiter : ':'))});
  } catch (const std::invalid_argument& e) {
    bad(e.what());
  }
  return 0;  // not reached
}

uint32_t context::nodegroup(std::string_view name, const token& at) {
  if (auto cycle = std::find(stack.begin(), stack.end(), name); cycle != stack.end()) {
    std::string chain;
    for (auto it = cycle; it != stack.end(); ++it) chain += *it + " -> ";
    chain += std::string(name);
    fail("nodegroup " + in_quotes(name) + " includes itself (" + chain + ") " + where(at), at);
  }
  if (auto it = expanded.find(name); it != expanded.end()) return it->second;
  auto def = groups.find(name);
  if (def == groups.end()) {
    std::string known;
    for (const auto& [n, _] : groups) known += (known.empty() ? "" : ", ") + n;
    fail("unknown nodegroup " + in_quotes(name) + " " + where(at) +
             (known.empty() ? " (the master config defines no nodegroups)"
                            : " (nodegroups: " + known + ")"),
         at);
  }
  const origin* from = &origins.emplace_back(origin{std::string(name), at.word, at.from});
  std::vector<token> toks;
  if (const auto* text = std::get_if<std::string>(&def->second)) {
    toks = tokenize(*text, from);
  } else {
    // A YAML list: each element is one word, whatever it holds.
    const auto& words = std::get<std::vector<std::string>>(def->second);
    for (size_t i = 0; i < words.size(); ++i) {
      toks.push_back({operator_of(words[i]).value_or(tk::term), words[i], i + 1, from});
    }
  }
  if (toks.empty()) fail("nodegroup " + in_quotes(name) + " is empty " + where(at), at);

  // Words with no operator between them that are all plain ids are a list of
  // ids (Salt turns them into L@a,b).
  bool list_of_ids = std::all_of(toks.begin(), toks.end(), [](const token& t) {
    return t.kind == tk::term && split_prefix(t.text).engine == 0 &&
           t.text.find_first_of("*?[") == std::string_view::npos;
  });
  stack.emplace_back(name);
  uint32_t root;
  if (list_of_ids) {
    // Salt joins them with ',' into L@, so a word "a,b" names two ids.
    list_term l;
    for (const token& t : toks) {
      std::string_view w = t.text;
      while (!w.empty()) {
        size_t comma = std::min(w.find(','), w.size());
        if (comma > 0) l.ids.emplace_back(w.substr(0, comma));
        w.remove_prefix(std::min(comma + 1, w.size()));
      }
    }
    std::sort(l.ids.begin(), l.ids.end());
    l.ids.erase(std::unique(l.ids.begin(), l.ids.end()), l.ids.end());
    root = p.add_node({node::op::term, p.add_term(std::move(l))});
  } else {
    root = parser(*this, std::move(toks), "the end of nodegroup " + in_quotes(name)).parse();
  }
  stack.pop_back();
  expanded.emplace(std::string(name), root);
  return root;
}

}  // namespace

uint32_t parse_compound(expression::program& p, std::string_view text, type t,
                        const nodegroups& groups) {
  context c{p, groups, text, t, {}, {}, {}};
  const origin* top = &c.origins.emplace_back();
  if (t == type::nodegroup) {
    std::string_view name = text;
    while (!name.empty() && is_space(name.front())) name.remove_prefix(1);
    while (!name.empty() && is_space(name.back())) name.remove_suffix(1);
    if (name.empty()) c.fail("empty expression: name a nodegroup", 0);
    return c.nodegroup(name, token{tk::term, name, 1, top});
  }
  std::vector<token> toks = tokenize(text, top);
  if (toks.empty()) c.fail("empty expression", 0);
  return parser(c, std::move(toks), "the end of the target").parse();
}

}  // namespace brine::target::detail
