#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/error.h"

// Rendering one pillar file as Salt's renderer pipe would, for the pipes
// brine can run: yaml, and jinja|yaml when the file holds no Jinja markup.
namespace brine::pillar::detail {

// A file that cannot be rendered. what() names the file and, where known,
// the line and column:
//   pillar file /srv/pillar/a.sls line 3 column 5: illegal map value
class render_error : public base::error {
 public:
  using base::error::error;
};

// The data of pillar file `path` whose text is `text`, as Salt's yaml
// renderer (SaltYamlSafeLoader) makes it: render::load_yaml (one document,
// YAML 1.1 scalars with `0644` as 644, merge keys, duplicate keys refused
// with "found conflicting ID", as are mapping or sequence keys and unknown
// tags; an empty file is null), its errors named "pillar file PATH". The
// first line chooses the renderer as Salt's template_shebang does (`#!yaml`,
// `#!jinja|yaml`; anything else is refused), and the default, jinja|yaml, is
// taken only when the file holds no Jinja markup. Throws render_error. Json:
// nlohmann::json (sorted keys) or nlohmann::ordered_json (document order,
// for top files).
template <class Json>
Json render_text(std::string_view text, const std::string& path);

// render_text of the file's contents.
template <class Json>
Json render_file(const std::string& path);

// Python's truth value of the data: null, false, 0, "", [] and {} are false.
bool truthy(const nlohmann::json& v);

}  // namespace brine::pillar::detail
