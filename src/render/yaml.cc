#include "render/yaml.h"

#include "base/utf8.h"

#include <yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <new>
#include <regex>
#include <set>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/yaml_json.h"

namespace brine::render {

namespace {

std::string located_message(const std::string& name, int line, int column,
                            const std::string& message) {
  std::string w = name;
  if (line > 0) w += " line " + std::to_string(line) + " column " + std::to_string(column);
  return w + ": " + message;
}

// A 1-based position; 0 when unknown.
struct mark {
  int line = 0;
  int column = 0;
};

mark from_libyaml(const yaml_mark_t& m) {
  return {static_cast<int>(m.line) + 1, static_cast<int>(m.column) + 1};
}

// PyYAML's str() of a Mark read by its C loader (no snippet: libyaml keeps
// no buffer) for a str stream.
std::string pyyaml_mark(mark m) {
  return "  in \"<unicode string>\", line " + std::to_string(m.line) + ", column " +
         std::to_string(m.column);
}

// PyYAML's str() of a MarkedYAMLError: the context and its mark (left out
// when it is the problem's), then the problem and its mark.
std::string pyyaml_text(const std::string& context, mark context_mark, const std::string& problem,
                        mark problem_mark) {
  std::string out;
  if (!context.empty()) {
    out += context + "\n";
    if (context_mark.line != problem_mark.line || context_mark.column != problem_mark.column) {
      out += pyyaml_mark(context_mark) + "\n";
    }
  }
  return out + problem + "\n" + pyyaml_mark(problem_mark);
}

// An error of brine's own wording (message) at `at`; salt_context is the
// "while constructing a mapping" PyYAML's constructor adds, at `context_at`.
[[noreturn]] void fail(const std::string& name, mark at, const std::string& message,
                       const std::string& salt_context = {}, mark context_at = {}) {
  throw yaml_error(name, at.line, at.column, message,
                   pyyaml_text(salt_context, context_at, message, at));
}

// One node of the document as libyaml's events describe it. Nodes live in
// one vector and refer to each other by index, so an alias is the index of
// its anchor's node (a tree with shared and even cyclic branches, which
// conversion bounds) and freeing a deep tree does not recurse.
struct node {
  enum class kind : std::uint8_t { scalar, sequence, mapping } type = kind::scalar;
  // "?" for a plain untagged scalar, "!" for a quoted one, "" for an
  // untagged collection, else the tag as libyaml resolved it.
  std::string tag;
  std::string text;
  mark at;
  // A sequence's items; a mapping's keys and values, alternating.
  std::vector<std::size_t> items;
};

struct document {
  std::vector<node> nodes;
  std::size_t root = 0;
  bool empty = true;
};

class libyaml_parser {
 public:
  libyaml_parser() {
    if (yaml_parser_initialize(&parser_) == 0) throw std::bad_alloc();
  }
  ~libyaml_parser() { yaml_parser_delete(&parser_); }
  libyaml_parser(const libyaml_parser&) = delete;
  libyaml_parser& operator=(const libyaml_parser&) = delete;
  yaml_parser_t* get() { return &parser_; }

 private:
  yaml_parser_t parser_{};
};

class libyaml_event {
 public:
  libyaml_event() = default;
  ~libyaml_event() { yaml_event_delete(&event_); }
  libyaml_event(const libyaml_event&) = delete;
  libyaml_event& operator=(const libyaml_event&) = delete;
  yaml_event_t* get() { return &event_; }
  const yaml_event_t& operator*() const { return event_; }

 private:
  yaml_event_t event_{};
};

std::string text_of(const yaml_char_t* s) {
  return s == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(s));
}

// libyaml's error as PyYAML's C loader raises it. Salt's yaml renderer
// reports a ScannerError by its problem alone (its marks have no buffer for
// SaltRenderError to quote; its _ERROR_MAP renames only the pure-Python
// scanner's tab message), other errors as str().
[[noreturn]] void fail_parser(const std::string& name, std::string_view text,
                              const yaml_parser_t& p) {
  std::string problem = p.problem == nullptr ? "unknown error" : p.problem;
  std::string context = p.context == nullptr ? "" : p.context;
  if (p.error == YAML_MEMORY_ERROR) throw std::bad_alloc();
  if (p.error == YAML_READER_ERROR) {
    // A reader error has an offset, not a mark.
    auto offset = std::min(p.problem_offset, text.size());
    int line = 1, column = 1;
    for (std::size_t i = 0; i < offset; ++i) {
      if (text[i] == '\n') {
        ++line;
        column = 1;
      } else if ((static_cast<unsigned char>(text[i]) & 0xc0) != 0x80) {
        ++column;
      }
    }
    char value[16];
    std::snprintf(value, sizeof value, "#x%04x", static_cast<unsigned>(p.problem_value));
    std::string message = "unacceptable character " + std::string(value) + ": " + problem;
    throw yaml_error(name, line, column, message,
                     message + "\n  in \"<unicode string>\", position " + std::to_string(offset));
  }
  mark problem_at = from_libyaml(p.problem_mark);
  mark context_at = from_libyaml(p.context_mark);
  std::string salt = pyyaml_text(context, context_at, problem, problem_at);
  if (p.error == YAML_SCANNER_ERROR) salt = problem;
  std::string message = problem;
  if (!context.empty()) {
    message += " (" + context;
    if (context_at.line != problem_at.line || context_at.column != problem_at.column) {
      message += " at line " + std::to_string(context_at.line) + " column " +
                 std::to_string(context_at.column);
    }
    message += ")";
  }
  throw yaml_error(name, problem_at.line, problem_at.column, message, salt);
}

// The one document of `text` as nodes, as PyYAML's composer (get_single_node)
// builds it: anchors and aliases resolved, a second document refused.
document compose(std::string_view text, const std::string& name) {
  libyaml_parser parser;
  yaml_parser_set_input_string(parser.get(), reinterpret_cast<const unsigned char*>(text.data()),
                               text.size());
  yaml_parser_set_encoding(parser.get(), YAML_UTF8_ENCODING);
  document doc;
  std::unordered_map<std::string, std::size_t> anchors;
  std::vector<std::size_t> open;
  int documents = 0;
  mark first_document;
  auto add = [&](std::size_t index) {
    if (open.empty()) {
      doc.root = index;
      doc.empty = false;
    } else {
      doc.nodes[open.back()].items.push_back(index);
    }
  };
  auto start = [&](const yaml_event_t& e, node::kind type, const yaml_char_t* anchor,
                   std::string tag) {
    node n;
    n.type = type;
    n.tag = std::move(tag);
    n.at = from_libyaml(e.start_mark);
    doc.nodes.push_back(std::move(n));
    std::size_t index = doc.nodes.size() - 1;
    if (anchor != nullptr) {
      auto [it, fresh] = anchors.try_emplace(text_of(anchor), index);
      if (!fresh) {
        mark first = doc.nodes[it->second].at;
        throw yaml_error(name, doc.nodes[index].at.line, doc.nodes[index].at.column,
                         "found duplicate anchor '" + it->first + "' (first at line " +
                             std::to_string(first.line) + " column " +
                             std::to_string(first.column) + ")",
                         pyyaml_text("found duplicate anchor; first occurrence", first,
                                     "second occurrence", doc.nodes[index].at));
      }
    }
    add(index);
    return index;
  };
  for (;;) {
    libyaml_event event;
    if (yaml_parser_parse(parser.get(), event.get()) == 0) fail_parser(name, text, *parser.get());
    const yaml_event_t& e = *event;
    switch (e.type) {
      case YAML_STREAM_END_EVENT:
        return doc;
      case YAML_DOCUMENT_START_EVENT:
        if (++documents == 2) {
          mark at = from_libyaml(e.start_mark);
          throw yaml_error(name, at.line, at.column,
                           "expected a single document in the stream, but found another",
                           pyyaml_text("expected a single document in the stream", first_document,
                                       "but found another document", at));
        }
        first_document = from_libyaml(e.start_mark);
        break;
      case YAML_ALIAS_EVENT: {
        std::string anchor = text_of(e.data.alias.anchor);
        auto it = anchors.find(anchor);
        if (it == anchors.end()) {
          mark at = from_libyaml(e.start_mark);
          throw yaml_error(name, at.line, at.column, "found undefined alias '" + anchor + "'",
                           pyyaml_text({}, {}, "found undefined alias", at));
        }
        add(it->second);
        break;
      }
      case YAML_SCALAR_EVENT: {
        const auto& s = e.data.scalar;
        std::string tag = text_of(s.tag);
        if (tag.empty()) tag = s.style == YAML_PLAIN_SCALAR_STYLE ? "?" : "!";
        std::size_t index = start(e, node::kind::scalar, s.anchor, std::move(tag));
        doc.nodes[index].text.assign(reinterpret_cast<const char*>(s.value), s.length);
        break;
      }
      case YAML_SEQUENCE_START_EVENT:
        open.push_back(start(e, node::kind::sequence, e.data.sequence_start.anchor,
                             text_of(e.data.sequence_start.tag)));
        break;
      case YAML_MAPPING_START_EVENT:
        open.push_back(start(e, node::kind::mapping, e.data.mapping_start.anchor,
                             text_of(e.data.mapping_start.tag)));
        break;
      case YAML_SEQUENCE_END_EVENT:
      case YAML_MAPPING_END_EVENT:
        open.pop_back();
        break;
      default:
        break;
    }
  }
}

// A scalar as SaltYamlSafeLoader constructs it. PyYAML reads `0644` as
// octal (420), but Salt's construct_scalar strips the leading zeros of an
// int first, so `mode: 0644` is 644: Salt users write file modes that way.
// `-0644`, `0b…` and `0x…` keep PyYAML's reading.
nlohmann::json scalar(const node& n) {
  const std::string& text = n.text;
  if (n.tag == "?" && text.size() > 1 && text[0] == '0' &&
      std::all_of(text.begin() + 1, text.end(),
                  [](char c) { return (c >= '0' && c <= '7') || c == '_'; })) {
    std::string digits;
    for (char c : text) {
      if (c != '_' && !(digits.empty() && c == '0')) digits += c;
    }
    if (digits.empty()) return 0;
    if (digits.size() < 19) return std::stoll(digits);
  }
  // Quoted (or explicitly tagged !!str) scalars are strings as they are.
  if (n.tag == "!" || n.tag == "tag:yaml.org,2002:str" ||
      n.tag == "tag:yaml.org,2002:python/unicode") {
    return text;
  }
  nlohmann::json j = base::yaml_scalar(text);
  // `!!float 1` is 1.0.
  if (n.tag == "tag:yaml.org,2002:float" && j.is_number_integer()) return j.get<double>();
  return j;
}

bool is_merge_key(const node& key) {
  return key.type == node::kind::scalar && key.tag == "?" && key.text == "<<";
}

std::string_view kind(const node& n) {
  switch (n.type) {
    case node::kind::sequence:
      return "sequence";
    case node::kind::mapping:
      return "mapping";
    default:
      return "scalar";
  }
}

// The tags SafeLoader (and Salt's loader on top of it) constructs; a plain
// node has "?", a quoted scalar "!", an untagged collection "".
void check_tag(const node& n, const std::string& name) {
  const std::string& tag = n.tag;
  if (tag.empty() || tag == "?" || tag == "!") return;
  static const std::set<std::string, std::less<>> known = {
      "str", "int", "float", "bool", "null", "map", "seq", "omap", "timestamp", "python/unicode"};
  constexpr std::string_view prefix = "tag:yaml.org,2002:";
  if (tag.starts_with(prefix) && known.contains(std::string_view(tag).substr(prefix.size()))) {
    return;
  }
  fail(name, n.at, "could not determine a constructor for the tag '" + tag + "'");
}

// A mapping's entries after Salt's flatten_mapping: merge keys replaced by
// the entries they bring, an explicit key winning over a merged one.
using entries = std::vector<std::pair<std::size_t, std::size_t>>;

constexpr int k_max_depth = 2000;

// Out is nlohmann::json, nlohmann::ordered_json or value.
template <class Out>
class converter {
  static constexpr bool k_value = std::is_same_v<Out, value>;

 public:
  converter(const document& doc, const std::string& name, std::size_t text_size)
      : doc_(doc),
        name_(name),
        // Without aliases a document has fewer nodes than bytes; aliases
        // can multiply that (a "billion laughs"), so expansion is bounded.
        budget_(text_size + 250'000) {}

  Out convert(std::size_t index, int depth) {
    const node& n = doc_.nodes[index];
    // Aliases can make the converted tree deeper than the text (or,
    // through a self-reference, endless) and wider.
    if (depth > k_max_depth) {
      fail(name_, n.at, "nesting deeper than 2000 levels (recursive alias?)");
    }
    if (budget_-- == 0) {
      fail(name_, n.at, "the document expands to too many nodes through aliases");
    }
    check_tag(n, name_);
    switch (n.type) {
      case node::kind::sequence: {
        if constexpr (k_value) {
          std::vector<value> items;
          items.reserve(n.items.size());
          for (std::size_t item : n.items) items.push_back(convert(item, depth + 1));
          return value::make_list(std::move(items));
        } else {
          Out a = Out::array();
          for (std::size_t item : n.items) a.push_back(convert(item, depth + 1));
          return a;
        }
      }
      case node::kind::mapping:
        return mapping(index, depth);
      case node::kind::scalar:
        break;
    }
    if constexpr (k_value) {
      return value::from_json(nlohmann::ordered_json(scalar(n)));
    } else {
      return Out(scalar(n));
    }
  }

 private:
  static constexpr const char* k_mapping_context = "while constructing a mapping";

  entries flatten(std::size_t index, int depth) {
    const node& map = doc_.nodes[index];
    if (depth > k_max_depth) {
      fail(name_, map.at, "nesting deeper than 2000 levels (recursive alias?)");
    }
    if (budget_-- == 0) {
      fail(name_, map.at, "the document expands to too many nodes through aliases");
    }
    entries explicit_entries, merged;
    for (std::size_t i = 0; i + 1 < map.items.size(); i += 2) {
      std::size_t k = map.items[i], v = map.items[i + 1];
      if (!is_merge_key(doc_.nodes[k])) {
        explicit_entries.emplace_back(k, v);
        continue;
      }
      const node& vn = doc_.nodes[v];
      if (vn.type == node::kind::mapping) {
        auto sub = flatten(v, depth + 1);
        merged.insert(merged.end(), sub.begin(), sub.end());
      } else if (vn.type == node::kind::sequence) {
        std::vector<entries> subs;
        for (std::size_t s : vn.items) {
          const node& sn = doc_.nodes[s];
          if (sn.type != node::kind::mapping) {
            fail(name_, sn.at, "expected a mapping for merging, but found " + std::string(kind(sn)),
                 k_mapping_context, map.at);
          }
          subs.push_back(flatten(s, depth + 1));
        }
        std::reverse(subs.begin(), subs.end());
        for (auto& sub : subs) merged.insert(merged.end(), sub.begin(), sub.end());
      } else {
        fail(name_, vn.at,
             "expected a mapping or list of mappings for merging, but found " +
                 std::string(kind(vn)),
             k_mapping_context, map.at);
      }
    }
    if (merged.empty()) return explicit_entries;
    std::set<std::string> existing;
    for (const auto& [k, v] : explicit_entries) {
      if (doc_.nodes[k].type == node::kind::scalar) existing.insert(doc_.nodes[k].text);
    }
    entries out;
    for (auto& e : merged) {
      const node& k = doc_.nodes[e.first];
      if (!(k.type == node::kind::scalar && existing.contains(k.text))) out.push_back(e);
    }
    out.insert(out.end(), explicit_entries.begin(), explicit_entries.end());
    return out;
  }

  Out mapping(std::size_t index, int depth) {
    const node& map = doc_.nodes[index];
    auto check_key = [&](const node& k) {
      if (k.type != node::kind::scalar) {
        fail(name_, k.at, "found unacceptable key", k_mapping_context, map.at);
      }
      check_tag(k, name_);
    };
    if constexpr (k_value) {
      value out = value::make_dict();
      for (const auto& [ki, vi] : flatten(index, depth)) {
        const node& k = doc_.nodes[ki];
        check_key(k);
        value key = convert(ki, depth + 1);
        // Python's dict: 1, 1.0 and True are one key.
        if (out.dict().find(key)) {
          fail(name_, k.at, "found conflicting ID '" + key.str() + "'", k_mapping_context, map.at);
        }
        out.dict().entries.emplace_back(key, convert(vi, depth + 1));
      }
      return out;
    } else {
      Out out = Out::object();
      std::set<std::string> seen;
      for (const auto& [ki, vi] : flatten(index, depth)) {
        const node& k = doc_.nodes[ki];
        check_key(k);
        nlohmann::json key = scalar(k);
        std::string key_name = key.is_string() ? key.get<std::string>() : key.dump();
        // Python compares keys by value and type: 1 and '1' are two keys.
        if (!seen.insert(key.dump()).second) {
          fail(name_, k.at, "found conflicting ID '" + key_name + "'", k_mapping_context, map.at);
        }
        out[key_name] = convert(vi, depth + 1);
      }
      return out;
    }
  }

  const document& doc_;
  const std::string& name_;
  std::size_t budget_;
};

template <class Out>
Out load(std::string_view text, const std::string& name) {
  document doc = compose(text, name);
  if (doc.empty) return Out(nullptr);
  return converter<Out>(doc, name, text.size()).convert(doc.root, 0);
}

// PyYAML's implicit resolvers (YAML 1.1): a plain scalar that reads back as
// something other than a string must be quoted when it is a string.
bool resolves_to_non_string(const std::string& s) {
  static const std::regex k_bool(
      "yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF");
  static const std::regex k_float(
      "[-+]?(?:[0-9][0-9_]*)\\.[0-9_]*(?:[eE][-+][0-9]+)?|\\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?"
      "|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\\.[0-9_]*|[-+]?\\.(?:inf|Inf|INF)|\\.(?:nan|NaN|NAN)");
  static const std::regex k_int(
      "[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+"
      "|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+");
  static const std::regex k_null("~|null|Null|NULL|");
  static const std::regex k_timestamp(
      "[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]"
      "|[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?(?:[Tt]|[ \\t]+)[0-9][0-9]?:[0-9][0-9]:[0-9]"
      "[0-9](?:\\.[0-9]*)?(?:[ \\t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?");
  if (s == "<<" || s == "=") return true;
  for (const std::regex* r : {&k_bool, &k_float, &k_int, &k_null, &k_timestamp}) {
    if (std::regex_match(s, *r)) return true;
  }
  return false;
}

std::vector<char32_t> decode(const std::string& s) { return base::utf8_code_points(s); }
using base::append_utf8;

bool is_break(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x85 || c == 0x2028 || c == 0x2029;
}
bool is_blank_or_end(char32_t c) {
  return c == 0 || c == ' ' || c == '\t' || c == '\r' || is_break(c);
}

// libyaml's IS_PRINTABLE: astral characters and U+0085 are not, so
// they make a scalar double-quoted and escaped.
bool printable(char32_t c) {
  return c == '\n' || (c >= 0x20 && c <= 0x7e) || (c >= 0xa0 && c <= 0xd7ff) ||
         (c >= 0xe000 && c <= 0xfffd && c != 0xfeff);
}

// libyaml's yaml_emitter_analyze_scalar, for allow_unicode.
struct scalar_analysis {
  bool empty = false;
  bool multiline = false;
  bool allow_flow_plain = true;
  bool allow_block_plain = true;
  bool allow_single_quoted = true;
};

scalar_analysis analyze(const std::vector<char32_t>& s) {
  scalar_analysis a;
  if (s.empty()) {
    a.empty = true;
    a.allow_flow_plain = false;
    return a;
  }
  bool block_indicators = false, flow_indicators = false, line_breaks = false, special = false;
  bool leading_space = false, leading_break = false, trailing_space = false, trailing_break = false,
       break_space = false, space_break = false;
  auto starts = [&](const char* p) {
    return s.size() >= 3 && s[0] == static_cast<char32_t>(p[0]) &&
           s[1] == static_cast<char32_t>(p[1]) && s[2] == static_cast<char32_t>(p[2]);
  };
  if (starts("---") || starts("...")) block_indicators = flow_indicators = true;
  bool preceded_by_ws = true;
  bool followed_by_ws = s.size() == 1 || is_blank_or_end(s[1]);
  bool previous_space = false, previous_break = false;
  auto in = [](char32_t c, std::u32string_view set) {
    return set.find(c) != std::u32string_view::npos;
  };
  for (std::size_t i = 0; i < s.size(); ++i) {
    char32_t ch = s[i];
    if (i == 0) {
      if (in(ch, U"#,[]{}&*!|>'\"%@`")) flow_indicators = block_indicators = true;
      if (in(ch, U"?:")) {
        flow_indicators = true;
        if (followed_by_ws) block_indicators = true;
      }
      if (ch == '-' && followed_by_ws) flow_indicators = block_indicators = true;
    } else {
      if (in(ch, U",?[]{}")) flow_indicators = true;
      if (ch == ':') {
        flow_indicators = true;
        if (followed_by_ws) block_indicators = true;
      }
      if (ch == '#' && preceded_by_ws) flow_indicators = block_indicators = true;
    }
    if (is_break(ch)) line_breaks = true;
    if (!printable(ch)) special = true;
    if (ch == ' ') {
      if (i == 0) leading_space = true;
      if (i == s.size() - 1) trailing_space = true;
      if (previous_break) break_space = true;
      previous_space = true;
      previous_break = false;
    } else if (is_break(ch)) {
      if (i == 0) leading_break = true;
      if (i == s.size() - 1) trailing_break = true;
      if (previous_space) space_break = true;
      previous_space = false;
      previous_break = true;
    } else {
      previous_space = previous_break = false;
    }
    preceded_by_ws = is_blank_or_end(ch);
    followed_by_ws = i + 2 >= s.size() || is_blank_or_end(s[i + 2]);
  }
  a.multiline = line_breaks;
  if (leading_space || leading_break || trailing_space || trailing_break) {
    a.allow_flow_plain = a.allow_block_plain = false;
  }
  if (break_space) a.allow_flow_plain = a.allow_block_plain = a.allow_single_quoted = false;
  if (space_break || special)
    a.allow_flow_plain = a.allow_block_plain = a.allow_single_quoted = false;
  if (line_breaks) a.allow_flow_plain = a.allow_block_plain = false;
  if (flow_indicators) a.allow_flow_plain = false;
  if (block_indicators) a.allow_block_plain = false;
  return a;
}

// A scalar as PyYAML's SafeRepresenter writes it: its text, and whether a
// plain spelling would read back as the same value (false for a string
// such as "yes" or "12").
struct scalar_text {
  std::string text;
  bool implicit;
};

// PyYAML's Emitter for the events SafeDumper makes of one value: the same
// state (column, indent stack, whitespace/indention flags) and the same
// decisions, written as recursion instead of a state machine.
class emitter {
 public:
  explicit emitter(const yaml_dump_options& o) : opts_(o) {}

  std::string run(const value& v) {
    find_anchors(v, 0);
    node(v, false, false, false, 0);
    write_indent();
    return std::move(out_);
  }

 private:
  static constexpr int k_width = 80;
  static constexpr int k_indent = 2;

  void write(const std::string& data, std::size_t width) {
    out_ += data;
    column_ += static_cast<int>(width);
  }
  void write_ascii(const std::string& data) { write(data, data.size()); }
  void write_points(const std::vector<char32_t>& t, std::size_t from, std::size_t to) {
    std::string d;
    for (std::size_t i = from; i < to; ++i) append_utf8(d, t[i]);
    write(d, to - from);
  }

  void write_indicator(const std::string& ind, bool need_whitespace, bool whitespace = false,
                       bool indention = false) {
    write_ascii(whitespace_ || !need_whitespace ? ind : " " + ind);
    whitespace_ = whitespace;
    indention_ = indention_ && indention;
  }

  void write_line_break() {
    whitespace_ = indention_ = true;
    out_ += '\n';
    column_ = 0;
  }

  void write_indent() {
    int indent = indent_ < 0 ? 0 : indent_;
    if (!indention_ || column_ > indent || (column_ == indent && !whitespace_)) write_line_break();
    if (column_ < indent) write_ascii(std::string(static_cast<std::size_t>(indent - column_), ' '));
    whitespace_ = indention_ = true;
  }

  void increase_indent(bool flow, bool indentless = false) {
    indents_.push_back(indent_);
    if (indent_ < 0) {
      indent_ = flow ? k_indent : 0;
    } else if (!indentless) {
      indent_ += k_indent;
    }
  }
  void pop_indent() {
    indent_ = indents_.back();
    indents_.pop_back();
  }

  static bool is_collection(const value& v) { return v.is_sequence_like() || v.is_dict(); }

  scalar_text represent(const value& v) {
    switch (v.type()) {
      case value::kind::none:
        return {"null", true};
      case value::kind::boolean:
        return {v.as_bool() ? "true" : "false", true};
      case value::kind::integer:
        return {std::to_string(v.as_int()), true};
      case value::kind::floating: {
        double d = v.as_float();
        if (std::isnan(d)) return {".nan", true};
        if (std::isinf(d)) return {d > 0 ? ".inf" : "-.inf", true};
        std::string r = float_repr(d);
        for (auto& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (r.find('.') == std::string::npos && r.find('e') != std::string::npos) {
          r.replace(r.find('e'), 1, ".0e");
        }
        return {r, true};
      }
      case value::kind::string:
        return {v.as_string(), !resolves_to_non_string(v.as_string())};
      case value::kind::undefined:
        v.defined();
        [[fallthrough]];
      default:
        // Salt's SafeOrderedDumper writes what it cannot represent (a
        // callable) as NULL.
        return {"NULL", true};
    }
  }

  // Whether PyYAML's representer gives the collection flow style.
  bool flow_style(const std::vector<const value*>& children) const {
    switch (opts_.flow_style) {
      case yaml_dump_options::flow::always:
        return true;
      case yaml_dump_options::flow::never:
        return false;
      case yaml_dump_options::flow::leaves:
        break;
    }
    return std::none_of(children.begin(), children.end(),
                        [](const value* c) { return is_collection(*c); });
  }

  std::vector<std::pair<value, value>> entries(const value& v) const {
    auto e = v.dict().entries;
    if (opts_.sort_keys && !(opts_.ordered_dicts_in_order && v.dict().ordered_dict)) {
      // Python's sorted() of keys of mixed types raises; PyYAML then keeps
      // the dict's order.
      try {
        std::stable_sort(e.begin(), e.end(),
                         [](const auto& x, const auto& y) { return less(x.first, y.first); });
      } catch (const template_error&) {
        e = v.dict().entries;
      }
    }
    return e;
  }

  bool simple_key(const value& k) {
    if (is_collection(k)) {
      return k.is_dict() ? k.dict().entries.empty() : k.items().empty();
    }
    scalar_text t = represent(k);
    return t.text.size() <= 128 && !analyze(decode(t.text)).multiline;
  }

  // PyYAML's Serializer.anchor_node: a list or dict reached twice (the
  // same object, not an equal one) gets an anchor, numbered in the order
  // the second sighting comes in a pre-order walk.
  static bool aliasable(const value& v) {
    return v.is_dict() || v.is_list() || (v.is_tuple() && !v.items().empty());
  }

  void find_anchors(const value& v, int depth) {
    if (depth > 500) throw template_error("yaml: data nested deeper than 500 levels");
    if (!aliasable(v)) return;
    auto [it, first] = anchors_.emplace(v.identity(), 0);
    if (!first) {
      if (it->second == 0) it->second = ++last_anchor_;
      return;
    }
    if (v.is_dict()) {
      for (const auto& [k, e] : entries(v)) {
        find_anchors(k, depth + 1);
        find_anchors(e, depth + 1);
      }
    } else {
      for (const auto& e : v.items()) find_anchors(e, depth + 1);
    }
  }

  static std::string anchor_name(int n) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "id%03d", n);
    return buf;
  }

  void node(const value& v, bool sequence, bool mapping, bool simple, int depth) {
    if (depth > 500) throw template_error("yaml: data nested deeper than 500 levels");
    sequence_ = sequence;
    mapping_ = mapping;
    simple_ = simple;
    if (aliasable(v)) {
      int anchor = anchors_[v.identity()];
      if (anchor > 0) {
        if (!emitted_.insert(v.identity()).second) {
          write_indicator("*" + anchor_name(anchor), true);
          return;
        }
        write_indicator("&" + anchor_name(anchor), true);
      }
    }
    if (v.is_sequence_like()) {
      std::vector<const value*> children;
      for (const auto& e : v.items()) children.push_back(&e);
      if (flow_level_ > 0 || flow_style(children) || children.empty()) {
        flow_sequence(v, depth);
      } else {
        block_sequence(v, depth);
      }
    } else if (v.is_dict()) {
      auto es = entries(v);
      std::vector<const value*> children;
      for (const auto& [k, e] : es) {
        children.push_back(&k);
        children.push_back(&e);
      }
      if (flow_level_ > 0 || flow_style(children) || es.empty()) {
        flow_mapping(es, depth);
      } else {
        block_mapping(es, depth);
      }
    } else {
      increase_indent(true);
      scalar(represent(v));
      pop_indent();
    }
  }

  void flow_sequence(const value& v, int depth) {
    write_indicator("[", true, true);
    ++flow_level_;
    increase_indent(true);
    bool first = true;
    for (const auto& e : v.items()) {
      if (!first) write_indicator(",", false);
      first = false;
      if (column_ > k_width) write_indent();
      node(e, true, false, false, depth + 1);
    }
    pop_indent();
    --flow_level_;
    write_indicator("]", false);
  }

  void flow_mapping(const std::vector<std::pair<value, value>>& es, int depth) {
    write_indicator("{", true, true);
    ++flow_level_;
    increase_indent(true);
    bool first = true;
    for (const auto& [k, e] : es) {
      if (!first) write_indicator(",", false);
      first = false;
      if (column_ > k_width) write_indent();
      if (simple_key(k)) {
        node(k, false, true, true, depth + 1);
        write_indicator(":", false);
      } else {
        write_indicator("?", true);
        node(k, false, true, false, depth + 1);
        if (column_ > k_width) write_indent();
        write_indicator(":", true);
      }
      node(e, false, true, false, depth + 1);
    }
    pop_indent();
    --flow_level_;
    write_indicator("}", false);
  }

  void block_sequence(const value& v, int depth) {
    increase_indent(false, mapping_ && !indention_);
    for (const auto& e : v.items()) {
      write_indent();
      write_indicator("-", true, false, true);
      node(e, true, false, false, depth + 1);
    }
    pop_indent();
  }

  void block_mapping(const std::vector<std::pair<value, value>>& es, int depth) {
    increase_indent(false);
    for (const auto& [k, e] : es) {
      write_indent();
      if (simple_key(k)) {
        node(k, false, true, true, depth + 1);
        write_indicator(":", false);
      } else {
        write_indicator("?", true, false, true);
        node(k, false, true, false, depth + 1);
        write_indent();
        write_indicator(":", true, false, true);
      }
      node(e, false, true, false, depth + 1);
    }
    pop_indent();
  }

  // Emitter.choose_scalar_style and process_scalar.
  void scalar(const scalar_text& t) {
    auto points = decode(t.text);
    scalar_analysis a = analyze(points);
    bool split = !simple_;
    bool plain = t.implicit && !(points.empty() && (flow_level_ > 0 || simple_)) &&
                 (flow_level_ > 0 ? a.allow_flow_plain : a.allow_block_plain);
    if (plain) {
      write_plain(points, split);
    } else if (a.allow_single_quoted) {
      write_single_quoted(points, split);
    } else {
      write_double_quoted(points, split);
    }
  }

  // libyaml's yaml_emitter_write_plain (Salt's dumper is CSafeDumper).
  void write_plain(const std::vector<char32_t>& text, bool split) {
    if (text.empty()) return;
    if (!whitespace_) write_ascii(" ");
    bool spaces = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
      char32_t ch = text[i];
      if (ch == ' ') {
        if (split && !spaces && column_ > k_width && !(i + 1 < text.size() && text[i + 1] == ' ')) {
          write_indent();
        } else {
          write_points(text, i, i + 1);
        }
        spaces = true;
      } else {
        write_points(text, i, i + 1);
        indention_ = false;
        spaces = false;
      }
    }
    whitespace_ = indention_ = false;
  }

  // libyaml's yaml_emitter_write_single_quoted.
  void write_single_quoted(const std::vector<char32_t>& text, bool split) {
    write_indicator("'", true);
    bool spaces = false, breaks = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
      char32_t ch = text[i];
      if (ch == ' ') {
        if (split && !spaces && column_ > k_width && i != 0 && i + 1 != text.size() &&
            text[i + 1] != ' ') {
          write_indent();
        } else {
          write_points(text, i, i + 1);
        }
        spaces = true;
      } else if (is_break(ch)) {
        if (!breaks && ch == '\n') write_line_break();
        if (ch == '\n') {
          write_line_break();
        } else {
          append_utf8(out_, ch);
          column_ = 0;
          whitespace_ = true;
        }
        indention_ = true;
        breaks = true;
      } else {
        if (breaks) write_indent();
        write_points(text, i, i + 1);
        if (ch == '\'') write_ascii("'");
        indention_ = false;
        spaces = breaks = false;
      }
    }
    if (breaks) write_indent();
    write_indicator("'", false);
  }

  // libyaml's yaml_emitter_write_double_quoted.
  void write_double_quoted(const std::vector<char32_t>& text, bool split) {
    write_indicator("\"", true);
    bool spaces = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
      char32_t ch = text[i];
      if (!printable(ch) || ch == 0xfeff || is_break(ch) || ch == '"' || ch == '\\') {
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
        write_ascii(buf);
        spaces = false;
      } else if (ch == ' ') {
        if (split && !spaces && column_ > k_width && i != 0 && i + 1 != text.size()) {
          write_indent();
          if (i + 1 < text.size() && text[i + 1] == ' ') write_ascii("\\");
        } else {
          write_points(text, i, i + 1);
        }
        spaces = true;
      } else {
        write_points(text, i, i + 1);
        spaces = false;
      }
    }
    write_indicator("\"", false);
  }

  const yaml_dump_options& opts_;
  std::map<const void*, int> anchors_;
  std::set<const void*> emitted_;
  int last_anchor_ = 0;
  std::string out_;
  int column_ = 0;
  int indent_ = -1;
  std::vector<int> indents_;
  int flow_level_ = 0;
  bool whitespace_ = true;
  bool indention_ = true;
  bool sequence_ = false;
  bool mapping_ = false;
  bool simple_ = false;
};

}  // namespace

yaml_error::yaml_error(const std::string& name, int line, int column, std::string message,
                       std::string salt_message)
    : template_error(located_message(name, line, column, message)),
      line_(line),
      column_(column),
      message_(std::move(message)),
      salt_message_(std::move(salt_message)) {
  if (salt_message_.empty()) salt_message_ = message_;
}

template <class Json>
Json load_yaml(std::string_view text, const std::string& name) {
  return load<Json>(text, name);
}

template nlohmann::json load_yaml<nlohmann::json>(std::string_view, const std::string&);
template nlohmann::ordered_json load_yaml<nlohmann::ordered_json>(std::string_view,
                                                                  const std::string&);

value load_yaml_value(std::string_view text, const std::string& name) {
  return load<value>(text, name);
}

std::string dump_yaml(const value& v, const yaml_dump_options& options) {
  std::string text = emitter(options).run(v);
  if (!options.strip) return text;
  // The yaml filter: str.strip(), then a trailing "\n..." removed.
  auto b = text.find_first_not_of(" \t\n\r\v\f");
  if (b == std::string::npos) return "";
  text = text.substr(b, text.find_last_not_of(" \t\n\r\v\f") - b + 1);
  if (text.ends_with("\n...")) text.resize(text.size() - 4);
  return text;
}

}  // namespace brine::render
