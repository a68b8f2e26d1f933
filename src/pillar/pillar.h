#pragma once

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "packed/packed.h"
#include "render/pgp.h"
#include "render/value.h"
#include "target/target.h"

// Salt's pillar compiler (3006) for YAML pillar in pillar_roots: top files,
// sls files, include, merging. See README.md for what is matched and what
// is left out.
namespace brine::pillar {

// Salt's pillar_source_merging_strategy. aggregate is yamlex's merge; without
// yamlex's !aggregate tags (brine has no yamlex renderer) it gives what
// overwrite gives, and so it is that here.
enum class strategy { smart, recurse, aggregate, overwrite, none };

// "smart", "recurse", … as Salt spells them; nullopt for anything else.
std::optional<strategy> parse_strategy(std::string_view name);

struct options {
  // pillar_roots: environment -> directories, searched in order.
  std::map<std::string, std::vector<std::string>> roots = {{"base", {"/srv/pillar"}}};
  // pillar_source_merging_strategy, checked by compiler::load.
  std::string merging_strategy = "smart";
  bool merge_lists = false;              // pillar_merge_lists
  std::optional<std::string> pillarenv;  // only this environment's top file and sls
  target::nodegroups groups;             // the master's nodegroups, for N@ and match: nodegroup
  std::string state_top = "top.sls";     // state_top: the top file's name in each environment
  // Templates (files with Jinja markup) render for each minion with its
  // grains and Salt's context; `opts` is what they see as opts (the host's
  // options, Salt's names; `id` and `grains` are set per minion), `salt`
  // makes the `salt` they call for a minion (none: templates that use it
  // fail with "'salt' is undefined").
  nlohmann::json opts = nlohmann::json::object();
  struct minion_salt {
    render::value salt;
    std::shared_ptr<const void> keep;  // what `salt` refers to, kept while the tree renders
  };
  std::function<minion_salt(std::string_view id, const nlohmann::json& grains)> salt;
  // What `#!yaml|gpg` files decrypt their PGP blocks with (the host runs
  // gpg: state::gpg_decryptor); empty: such files are errors.
  render::pgp_decryptor gpg;

  // Salt's ext_pillar: the option's entries in their order, each an
  // interface's name and its configuration (a mapping, a list or a scalar,
  // as written), and the interfaces the host provides by name. Each entry
  // runs for every compile, its data merged over the pillar of the top
  // file (or, with ext_pillar_first, under it).
  struct ext_entry {
    std::string name;
    nlohmann::ordered_json config;
  };
  std::vector<ext_entry> ext_pillar;
  bool ext_pillar_first = false;
  // What one interface is asked: for minion `id` with its cached grains
  // (absent: none), the pillar so far, the entry's configuration.
  struct ext_call {
    std::string_view id;
    packed::value grains;
    const nlohmann::ordered_json& pillar;
    const nlohmann::ordered_json& config;
  };
  // What it gives: a mapping, or null (or an empty mapping) for nothing. A
  // failure is an exception, reported as Salt reports it: "Failed to load
  // ext_pillar NAME: WHAT". Called on the compiling threads, several at once.
  using ext_function = std::function<nlohmann::ordered_json(const ext_call&)>;
  std::map<std::string, ext_function, std::less<>> ext_pillars;
};

// The ext_pillar option as Salt reads it: a list of one-key mappings
// (`- cmd_json: 'cmd'`), each naming an interface of `known`. Throws
// base::error naming the item and the fix for anything else; Salt logs
// "The \"ext_pillar\" option is malformed" or "Specified ext_pillar
// interface X is unavailable" and compiles without it, which hides missing
// secrets until a state uses them.
std::vector<options::ext_entry> parse_ext_pillar(
    const nlohmann::json& option, const std::map<std::string, options::ext_function, std::less<>>& known);

// A pillar tree loaded once: every top file read and merged, every sls file
// it can reach (through the top files and include) read and parsed, target
// expressions parsed, sls globs expanded. compile() then only matches targets
// and merges parsed data, and minions that match the same targets share one
// result (kept in a bounded cache). A tree with a template (a top or sls
// file with Jinja markup) is built again for each compile(), its templates
// rendered with that minion's grains, as Salt does for every minion; its
// plain files and listings are load()'s. Immutable after load() but for that
// cache; copies share their state; compile() may run on any number of
// threads at once. A changed tree on disk needs a new load().
class compiler {
 public:
  // Throws base::error for bad options only (an unknown merging strategy, a
  // pillarenv that pillar_roots does not define). Broken files, missing sls
  // and bad targets become errors in every compile() that meets them, as
  // Salt reports them in the pillar's `_errors`.
  static compiler load(options o);

  struct result {
    nlohmann::json pillar;  // always an object; sorted keys, for caches and targeting
    // The same pillar in Salt's key order: each sls file's mappings in
    // document order, merged as Salt's dict updates merge them (a key
    // keeps its first place, new keys go last). What templates iterate
    // and what the minion is sent.
    nlohmann::ordered_json ordered;
    std::vector<std::string> errors;  // Salt's _errors, in Salt's order; empty when clean
  };

  // The pillar of minion `id`. `grains`: its cached grains, or null when none
  // are cached; the top file's targets are matched against them as Salt
  // matches a minion against its own grains when it compiles its pillar, so
  // with null grains a grain or ipcidr term does not match (Salt: grains {}).
  // Pillar terms (I@, match: pillar) match nothing: Salt matches them against
  // the master's own opts["pillar"], which is empty, or with ext_pillar_first
  // the ext_pillar data of this minion.
  result compile(std::string_view id, const nlohmann::json* grains) const;

  // compile() without the copy: minions that match the same targets get the
  // same object (a master caching 100k pillars keeps one per distinct set).
  std::shared_ptr<const result> compile_shared(std::string_view id,
                                               const nlohmann::json* grains) const;
  // The same with the grains packed, as the master's cache keeps them
  // (absent: none cached); no copy of them is made.
  std::shared_ptr<const result> compile_shared(std::string_view id, packed::value grains) const;

  struct tree;  // internal

 private:
  explicit compiler(std::shared_ptr<const tree> t) : t_(std::move(t)) {}
  // The top file's part (pillar_roots): shared between minions that match
  // alike unless templated; `ext`: ext_pillar_first's data, what pillar
  // terms and templates see. `top_errors`: how many of its errors, at the
  // end, are the top file's.
  std::shared_ptr<const result> compile_tree(std::string_view id, packed::value grains,
                                             const nlohmann::ordered_json* ext,
                                             size_t& top_errors) const;
  std::shared_ptr<const tree> t_;
};

}  // namespace brine::pillar
