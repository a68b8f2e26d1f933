#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>

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
  // For include/import/extends (not yet supported): the source of a
  // template by name, or nullopt when there is none.
  std::function<std::optional<std::string>(const std::string& name)> loader;

  // The settings of Salt's jinja renderer with default minion options.
  static environment salt();
};

// Renders `source`, named `name` in error messages. Throws template_error:
//   template 'x.sls' line 3 column 7: 'foo' is undefined
std::string render(const std::string& source, const std::string& name, const context& ctx,
                   const environment& env = {});

// The same with the context given as a JSON object.
std::string render_json(const std::string& source, const std::string& name,
                        const nlohmann::ordered_json& ctx, const environment& env = {});

}  // namespace brine::render
