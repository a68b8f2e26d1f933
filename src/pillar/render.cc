#include "pillar/render.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <set>
#include <utility>
#include <vector>

#include "base/fs.h"
#include "base/yaml_json.h"

namespace brine::pillar::detail {

namespace {

std::string_view trim(std::string_view s) {
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

std::string where(const std::string& path, const YAML::Mark& mark) {
  std::string w = "pillar file " + path;
  if (mark.line >= 0) {
    w += " line " + std::to_string(mark.line + 1) + " column " + std::to_string(mark.column + 1);
  }
  return w;
}

[[noreturn]] void fail(const std::string& path, const YAML::Mark& mark, const std::string& what) {
  throw render_error(where(path, mark) + ": " + what);
}

// Salt's template_shebang and check_render_pipe_str: a first line `#!a|b`
// (not `#!/path`) names the renderers, each maybe followed by a space and
// arguments; otherwise the master's `renderer`, jinja|yaml. Refuses pipes
// brine cannot run and, for a pipe with jinja, any Jinja markup.
void check_renderer(std::string_view text, const std::string& path) {
  std::string_view first = text.substr(0, text.find('\n'));
  bool jinja = true;
  if (first.starts_with("#!") && !first.starts_with("#!/")) {
    std::string_view pipe = trim(first.substr(2));
    std::vector<std::string_view> names;
    std::string_view rest = pipe;
    for (;;) {
      size_t bar = rest.find('|');
      std::string_view part = trim(rest.substr(0, bar));
      names.push_back(part.substr(0, part.find(' ')));
      if (bar == std::string_view::npos) break;
      rest = rest.substr(bar + 1);
    }
    using v = std::vector<std::string_view>;
    if (names == v{"yaml"}) {
      jinja = false;
    } else if (names != v{"jinja", "yaml"} && names != v{"yaml", "jinja"}) {
      throw render_error("pillar file " + path + " line 1: renderer '#!" + std::string(pipe) +
                         "' is not supported; brine renders pillar files as #!yaml, or as "
                         "#!jinja|yaml (the default) when they hold no Jinja markup");
    }
  }
  if (!jinja) return;
  size_t at = std::string_view::npos;
  for (std::string_view markup : {"{{", "{%", "{#"}) at = std::min(at, text.find(markup));
  if (at == std::string_view::npos) return;
  auto line = std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n') + 1;
  throw render_error("pillar file " + path + " line " + std::to_string(line) +
                     " uses Jinja markup; brine renders Jinja in pillar once the template "
                     "engine lands (states issue); until then write plain YAML");
}

// A scalar as SaltYamlSafeLoader constructs it. PyYAML reads `0644` as
// octal (420), but Salt's construct_scalar strips the leading zeros of an
// int first, so `mode: 0644` is 644: Salt users write file modes that way.
// `-0644`, `0b…` and `0x…` keep PyYAML's reading.
nlohmann::json scalar(const YAML::Node& n) {
  const std::string& text = n.Scalar();
  if (n.Tag() == "?" && text.size() > 1 && text[0] == '0' &&
      std::all_of(text.begin() + 1, text.end(),
                  [](char c) { return (c >= '0' && c <= '7') || c == '_'; })) {
    std::string digits;
    for (char c : text) {
      if (c != '_' && !(digits.empty() && c == '0')) digits += c;
    }
    if (digits.empty()) return 0;
    if (digits.size() < 19) return std::stoll(digits);
  }
  return base::yaml_to_json(n);
}

bool is_merge_key(const YAML::Node& key) {
  return key.IsScalar() && key.Tag() == "?" && key.Scalar() == "<<";
}

std::string_view kind(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Sequence:
      return "sequence";
    case YAML::NodeType::Map:
      return "mapping";
    default:
      return "scalar";
  }
}

// The tags SafeLoader (and Salt's loader on top of it) constructs; a plain
// node has "?", a quoted scalar "!", an untagged collection "" or "?".
void check_tag(const YAML::Node& n, const std::string& path) {
  const std::string& tag = n.Tag();
  if (tag.empty() || tag == "?" || tag == "!") return;
  static const std::set<std::string, std::less<>> known = {
      "str", "int", "float", "bool", "null", "map", "seq", "omap", "timestamp", "python/unicode"};
  constexpr std::string_view prefix = "tag:yaml.org,2002:";
  if (tag.starts_with(prefix) && known.contains(std::string_view(tag).substr(prefix.size()))) {
    return;
  }
  fail(path, n.Mark(), "could not determine a constructor for the tag '" + tag + "'");
}

// A mapping's entries after Salt's flatten_mapping: merge keys replaced by
// the entries they bring, an explicit key winning over a merged one.
using entries = std::vector<std::pair<YAML::Node, YAML::Node>>;

template <class Json>
class converter {
 public:
  explicit converter(const std::string& path) : path_(path) {}

  Json value(const YAML::Node& n, int depth) {
    // yaml-cpp bounds nesting while parsing, but aliases can still make the
    // converted tree deeper (or, through a self-reference, endless).
    if (depth > 2000) fail(path_, n.Mark(), "nesting deeper than 2000 levels (recursive alias?)");
    check_tag(n, path_);
    switch (n.Type()) {
      case YAML::NodeType::Null:
      case YAML::NodeType::Undefined:
        return nullptr;
      case YAML::NodeType::Sequence: {
        Json a = Json::array();
        for (const auto& item : n) a.push_back(value(item, depth + 1));
        return a;
      }
      case YAML::NodeType::Map:
        return mapping(n, depth);
      case YAML::NodeType::Scalar:
        break;
    }
    return Json(scalar(n));
  }

 private:
  entries flatten(const YAML::Node& map, int depth) {
    if (depth > 2000) fail(path_, map.Mark(), "nesting deeper than 2000 levels (recursive alias?)");
    entries explicit_entries, merged;
    for (const auto& kv : map) {
      if (!is_merge_key(kv.first)) {
        explicit_entries.emplace_back(kv.first, kv.second);
        continue;
      }
      const YAML::Node& v = kv.second;
      if (v.IsMap()) {
        auto sub = flatten(v, depth + 1);
        merged.insert(merged.end(), sub.begin(), sub.end());
      } else if (v.IsSequence()) {
        std::vector<entries> subs;
        for (const auto& s : v) {
          if (!s.IsMap()) {
            fail(path_, s.Mark(),
                 "expected a mapping for merging, but found " + std::string(kind(s)));
          }
          subs.push_back(flatten(s, depth + 1));
        }
        std::reverse(subs.begin(), subs.end());
        for (auto& sub : subs) merged.insert(merged.end(), sub.begin(), sub.end());
      } else {
        fail(path_, v.Mark(),
             "expected a mapping or list of mappings for merging, but found " +
                 std::string(kind(v)));
      }
    }
    if (merged.empty()) return explicit_entries;
    std::set<std::string> existing;
    for (const auto& [k, v] : explicit_entries) {
      if (k.IsScalar()) existing.insert(k.Scalar());
    }
    entries out;
    for (auto& e : merged) {
      if (!(e.first.IsScalar() && existing.contains(e.first.Scalar()))) out.push_back(e);
    }
    out.insert(out.end(), explicit_entries.begin(), explicit_entries.end());
    return out;
  }

  Json mapping(const YAML::Node& n, int depth) {
    Json out = Json::object();
    std::set<std::string> seen;
    for (const auto& [k, v] : flatten(n, depth)) {
      if (k.IsMap() || k.IsSequence()) fail(path_, k.Mark(), "found unacceptable key");
      check_tag(k, path_);
      nlohmann::json key = scalar(k);
      std::string name = key.is_string() ? key.get<std::string>() : key.dump();
      // Python compares keys by value and type: 1 and '1' are two keys.
      if (!seen.insert(key.dump()).second) {
        fail(path_, k.Mark(), "found conflicting ID '" + name + "'");
      }
      out[name] = value(v, depth + 1);
    }
    return out;
  }

  const std::string& path_;
};

}  // namespace

bool truthy(const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::null:
    case nlohmann::json::value_t::discarded:
      return false;
    case nlohmann::json::value_t::boolean:
      return v.get<bool>();
    case nlohmann::json::value_t::number_integer:
      return v.get<int64_t>() != 0;
    case nlohmann::json::value_t::number_unsigned:
      return v.get<uint64_t>() != 0;
    case nlohmann::json::value_t::number_float:
      return v.get<double>() != 0.0;
    default:
      return !v.empty();
  }
}

template <class Json>
Json render_text(std::string_view text, const std::string& path) {
  check_renderer(text, path);
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(std::string(text));
  } catch (const YAML::Exception& e) {
    fail(path, e.mark, e.msg);
  }
  if (docs.empty()) return nullptr;
  if (docs.size() > 1) {
    fail(path, docs[1].Mark(), "expected a single document in the stream, but found another");
  }
  try {
    return converter<Json>(path).value(docs[0], 0);
  } catch (const YAML::Exception& e) {
    fail(path, e.mark, e.msg);
  }
}

template <class Json>
Json render_file(const std::string& path) {
  std::string text;
  try {
    text = base::read_file(path);
  } catch (const base::error& e) {
    throw render_error("pillar file " + std::string(e.what()));
  }
  return render_text<Json>(text, path);
}

template nlohmann::json render_text<nlohmann::json>(std::string_view, const std::string&);
template nlohmann::ordered_json render_text<nlohmann::ordered_json>(std::string_view,
                                                                    const std::string&);
template nlohmann::json render_file<nlohmann::json>(const std::string&);
template nlohmann::ordered_json render_file<nlohmann::ordered_json>(const std::string&);

}  // namespace brine::pillar::detail
