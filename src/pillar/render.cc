#include "pillar/render.h"

#include <algorithm>
#include <vector>

#include "base/fs.h"
#include "render/yaml.h"

namespace brine::pillar::detail {

namespace {

std::string_view trim(std::string_view s) {
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
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
  try {
    return render::load_yaml<Json>(text, path);
  } catch (const render::yaml_error& e) {
    std::string where = "pillar file " + path;
    if (e.line() > 0) {
      where += " line " + std::to_string(e.line()) + " column " + std::to_string(e.column());
    }
    throw render_error(where + ": " + e.message());
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
