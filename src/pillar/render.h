#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "render/pgp.h"
#include "render/value.h"

// Rendering one pillar file as Salt's renderer pipe would, for the pipes
// brine can run: yaml and jinja|yaml, either followed by gpg.
namespace brine::pillar::detail {

// A file that cannot be rendered. what() names the file and, where known,
// the line and column:
//   pillar file /srv/pillar/a.sls line 3 column 5: illegal map value
class render_error : public base::error {
 public:
  using base::error::error;
};

// What a pillar template sees when it renders for one minion: Salt's
// render_pstate context (grains, pillar, opts, saltenv, sls, salt and the
// tpl*/sls* names of generate_sls_context), its loader reading the
// environment's pillar_roots.
struct template_context {
  std::string saltenv;
  std::string sls;                 // "" for a top file
  std::vector<std::string> roots;  // where import, include and import_yaml look
  render::value salt;              // `salt`, or undefined when the host gives none
  render::value grains;
  render::value pillar;
  render::value opts;
};

// True when the file renders through Jinja (its `#!` line names jinja, or it
// has none) and holds Jinja markup (`{{`, `{%`, `{#`): its data depends on
// the minion.
bool is_template(std::string_view text);

// The data of pillar file `path` whose text is `text`, as Salt's renderer
// pipe makes it: the first line chooses the renderers as Salt's
// template_shebang does (`#!yaml`, `#!jinja|yaml`, the default, each maybe
// followed by `|gpg`; anything else is refused); a template renders
// through Jinja with `ctx` (without one it is an error), then the YAML is
// read as Salt's loader does (render::load_yaml: YAML 1.1 scalars, `0644`
// is 644, merge keys, duplicate keys refused with "found conflicting ID",
// one document), then with `|gpg` its PGP blocks are decrypted with `gpg`
// (render::decrypt_pgp; without one the file is an error). An empty file is
// null. Throws render_error. Json: nlohmann::json (sorted keys) or
// nlohmann::ordered_json (document order, for top files).
template <class Json>
Json render_text(std::string_view text, const std::string& path,
                 const template_context* ctx = nullptr,
                 const render::pgp_decryptor* gpg = nullptr);

// render_text of the file's contents.
template <class Json>
Json render_file(const std::string& path, const template_context* ctx = nullptr,
                 const render::pgp_decryptor* gpg = nullptr);

}  // namespace brine::pillar::detail
