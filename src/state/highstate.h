#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "render/pgp.h"
#include "render/value.h"
#include "state/high.h"
#include "target/target.h"

// Salt 3006's HighState for one minion: the top files of its file_roots
// matched against its id, grains and pillar, SLS files rendered (Jinja, YAML,
// JSON pipes) with Salt's template context, includes resolved, and the
// results state.show_top / show_highstate / show_sls / show_low_sls /
// show_lowstate and slsutil.renderer return. Blocking (reads files, and
// templates may call execution functions through `salt`); one compiler is
// used by one thread at a time.
namespace brine::state {

// The options of a minion (or master) that HighState reads, Salt's names.
struct options {
  // file_roots: environment -> directories, in the configuration's order.
  std::vector<std::pair<std::string, std::vector<std::string>>> file_roots = {
      {"base", {"/srv/salt"}}};
  std::string state_top = "top.sls";
  std::optional<std::string> saltenv;  // opts saltenv (null by default)
  std::optional<std::string> state_top_saltenv;
  std::string top_file_merging_strategy = "merge";
  std::vector<std::string> env_order;
  std::optional<std::string> default_top = std::string("base");
  bool state_auto_order = true;
  std::vector<std::string> disabled_requisites;
  std::string renderer = "jinja|yaml";
  bool jinja_trim_blocks = false;
  bool jinja_lstrip_blocks = false;
  target::nodegroups nodegroups;
  // Salt's gpg renderer (`#!yaml|gpg`, `#!jinja|yaml|gpg`): what decrypts
  // the PGP blocks (from_opts: state::gpg_decryptor_of); empty: refused.
  render::pgp_decryptor gpg;
  // master_tops_first: the master's tops before the top file's matches.
  bool master_tops_first = false;

  // Reads Salt's option names from a minion's opts (file_roots,
  // state_top, top_file_merging_strategy, env_order, ...); missing ones
  // keep their defaults.
  static options from_opts(const nlohmann::json& opts);
};

// The minion the states are compiled for.
struct minion {
  std::string id;
  json grains = json::object();
  json pillar = json::object();
  json opts = json::object();
  // The pillar was compiled here (masterless): below its top level its
  // mappings are the OrderedDicts Salt's YAML renderer made, which the
  // `yaml` filter writes in their order and Jinja's messages name. A
  // pillar a master sent is plain dicts (msgpack made them so).
  bool pillar_ordered_dicts = false;
  // Salt's master_tops for this minion ({saltenv: [sls, ...]}), merged into
  // the top file's matches.
  json master_tops = json::object();
};

// What a show_* function returns: Salt's data, or (for a failure) Salt's
// list of error strings, and the retcode salt-call exits with.
struct result {
  json ret;
  int retcode = 0;
};

// A file that the pipeline refused or could not render. what() is the
// text that follows "Rendering SLS 'env:sls' failed: " in Salt's error.
class render_failure : public base::error {
 public:
  using base::error::error;
};

class compiler {
 public:
  compiler(options o, minion m);
  ~compiler();
  compiler(const compiler&) = delete;
  compiler& operator=(const compiler&) = delete;

  result show_top();
  result show_highstate();
  result show_lowstate();
  // `mods`: comma-separated sls names; `saltenv`: default base.
  result show_sls(const std::string& mods, const std::optional<std::string>& saltenv = {});
  result show_low_sls(const std::string& mods, const std::optional<std::string>& saltenv = {});
  // What state.apply, state.highstate and state.sls run: the ordered low
  // chunks of the highstate (`mods` unset) or of the sls files `mods`
  // (comma-separated), with `exclude` (sls names, or {id: ...}/{sls: ...})
  // added to the high data's __exclude__. ret is the chunks, or Salt's
  // list of errors with retcode 1; `no_top` says the top files gave this
  // minion nothing (Salt's "No Top file ... matches found").
  struct run_plan {
    json chunks = json::array();
    json errors;  // null, or a list of strings
    bool no_top = false;
  };
  run_plan plan(const std::optional<std::string>& mods, const std::optional<std::string>& saltenv,
                const json& exclude);
  // slsutil.renderer: `path` is salt://... or a file path; `kwargs` (sls,
  // tpldir, saltenv, ...) reach the template's context as in Salt.
  result renderer(const std::string& path, const std::string& default_renderer,
                  const json& kwargs);

  // file.managed's `template: jinja`: the text of the file `path` rendered
  // by Jinja alone with Salt's template context (salt, grains, pillar,
  // opts, saltenv, sls, tpldir...) and `context` over it (the state's
  // defaults and context). Throws render_failure with Salt's message.
  std::string render_file(const std::string& path, const std::string& saltenv,
                          const std::string& sls, const json& context);

  // cp.list_states: the sls names of an environment, sorted.
  std::vector<std::string> list_states(const std::string& saltenv) const;
  // Every file path (relative, '/'-separated) in an environment, sorted.
  std::vector<std::string> list_files(const std::string& saltenv) const;
  // The path on disk of `rel` (relative to the roots, or salt://rel) in
  // `saltenv`, or nullopt.
  std::optional<std::string> find_file(const std::string& rel, const std::string& saltenv) const;

  // The value templates see as `salt` (bridge.h makes one); until set,
  // templates that name it fail with "'salt' is undefined".
  void set_salt(render::value salt);
  // The minion's grains, pillar and opts as the templates see them: one
  // object per compiler, shared by every template and salt[...] function
  // (a change one template makes is seen by the next, as in Salt).
  const render::value& grains() const;
  const render::value& pillar() const;
  const render::value& opts() const;
  const options& settings() const;

  struct impl;

 private:
  std::unique_ptr<impl> p_;
};

// Forgets what compiles share (parsed templates, the YAML of rendered
// texts): the next compile starts cold (a benchmark's cold figure).
void forget_compile_caches();

// The renderer names of a pipe (`jinja|yaml`): Salt's check_render_pipe_str.
std::vector<std::string> parse_pipe(const std::string& pipe);

}  // namespace brine::state
