#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "render/value.h"

// A Jinja2-compatible template engine (Jinja 3.1 semantics, as Salt sets it
// up: StrictUndefined, the `do` and loop-control extensions). render() is
// pure: it reads the context and writes nothing outside its own values, so
// separate renders may run on separate threads.
namespace brine::render {

// The names a template sees. A host adds callables (salt[...]) as values of
// kind callable.
using context = std::map<std::string, value>;

struct environment {
  // Jinja's options. Salt's defaults: jinja_trim_blocks and
  // jinja_lstrip_blocks are False.
  bool trim_blocks = false;
  bool lstrip_blocks = false;
  bool keep_trailing_newline = false;
  // Salt's render_jinja_tmpl puts back the newline Jinja drops when the
  // source ends with one.
  bool salt_trailing_newline = false;
  // The source of a template that include, import, from, extends and
  // Salt's import_yaml/import_json/import_text ask for, or nullopt when
  // there is none (the tag then fails with Jinja's TemplateNotFound, or
  // `include ... ignore missing` skips it). `name` is already resolved:
  // as Salt's SaltCacheLoader does, a name whose first part is `.` or `..`
  // is taken relative to the asking template's `tpldir` (its directory;
  // a template loaded by a relative name keeps its asker's) and one that
  // climbs above the root is not found. `from` names the asking template.
  // Each template is loaded once per render, and parsed once per process
  // for as long as its text is the same (the trees are shared).
  std::function<std::optional<std::string>(const std::string& name, const std::string& from)>
      loader;

  // Names every template sees, imported and included ones too, below the
  // render context: Salt puts salt, grains, pillar, opts, saltenv, sls,
  // tpldir, ... here as well as in the context. When `tpldir` is a global,
  // a loaded template sees its own tplfile, tpldir and tpldot (as Salt's
  // loader sets them) in place of the globals'.
  context globals;

  // Filters and tests a host adds (Salt's, the state compiler's), by name;
  // they take precedence over the built-in ones. A filter gets the value
  // left of `|` and the call's arguments; a test the value left of `is`.
  // Throw template_error to fail; the renderer adds the position.
  using filter_function = std::function<value(const value& input, call_args& args)>;
  using test_function = std::function<bool(const value& input, call_args& args)>;
  std::map<std::string, filter_function> filters;
  std::map<std::string, test_function> tests;

  // Parses YAML text in Salt's dialect, for import_yaml and load_yaml
  // (throws template_error); unset, those tags fail saying so.
  std::function<nlohmann::ordered_json(std::string_view text, const std::string& name)>
      yaml_loader;

  // A bound on the statements, loop iterations and calls one render may
  // execute, 0 for none; a string or list that `*`, `+` or `~` builds
  // costs its length. Past it the render fails with template_error
  // (fuzzing sets it; Jinja has none).
  std::uint64_t max_steps = 0;

  // The settings of Salt's jinja renderer with default minion options.
  static environment salt();
};

// Forgets the parsed templates every render shares (a benchmark's cold
// figure; a host that must parse afresh).
void forget_parsed_templates();

// Renders `source`, named `name` in error messages. Throws template_error:
//   template 'x.sls' line 3 column 7: 'foo' is undefined
std::string render(const std::string& source, const std::string& name, const context& ctx,
                   const environment& env = {});

// The same with the context given as a JSON object.
std::string render_json(const std::string& source, const std::string& name,
                        const nlohmann::ordered_json& ctx, const environment& env = {});

// Salt's renderers that run Python code (#!py, #!pyobjects, #!pydsl), which
// brine never runs: the refusal that names the renderer, the file and what
// to write instead; "" for any other renderer.
std::string python_renderer_refusal(std::string_view renderer, const std::string& path);

}  // namespace brine::render
