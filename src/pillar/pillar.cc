#include "pillar/pillar.h"

#include <fnmatch.h>
#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <deque>
#include <filesystem>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <unordered_map>
#include <utility>

#include "base/error.h"
#include "base/fs.h"
#include "packed/packed.h"
#include "pillar/merge.h"
#include "base/python_truth.h"
#include "pillar/render.h"

namespace brine::pillar {

namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// One file on disk, rendered once however many sls names and environments
// reach it.
struct sls_file {
  std::string path;
  std::string error;  // rendering failed: the detail, naming the file
  // What Salt keeps in `mods` for it: the data with a list `include` taken
  // out; {} for data that is false in Python's sense (an empty file). In
  // document order, as Salt's YAML loader keeps mappings.
  ordered_json own = ordered_json::object();
  bool truthy = false;       // the data before `include` was taken out
  bool has_include = false;  // a mapping with an `include` key
  bool include_is_list = false;
  ordered_json include;
  bool is_template = false;  // its data depends on the minion: rendered for each
};

// One include item of an sls file, resolved at load.
struct include_ref {
  std::string error;               // a malformed item: reported, skipped
  std::vector<std::string> names;  // sls names, as Salt's fnmatch over `avail` finds them
  std::vector<std::string> key;    // `key: a:b` nests the data under a, b
};

// An sls name as some top file or include names it in one environment.
struct sls_node {
  const sls_file* file = nullptr;  // null: not in the environment's roots
  std::vector<include_ref> includes;
};

struct env_data {
  std::string name;
  std::vector<std::string> roots;
  bool has_roots = false;                      // Salt: pillar_roots.get(saltenv) is true
  bool listed = false;                         // base or a pillar_roots key: Salt's `avail` has it
  std::vector<std::string> avail;              // sls names in the roots, sorted (list_states)
  std::set<std::string, std::less<>> ignored;  // sls of targets with ignore_missing
  std::unordered_map<std::string, sls_node> nodes;
  // A top file's sls entry -> the sls it names (fnmatch over avail, else itself).
  std::unordered_map<std::string, std::vector<std::string>> expansions;
};

struct top_target {
  std::string text;
  std::optional<target::expression> expr;  // none: the target is bad (an error is reported)
  std::vector<std::string> sls;
};

struct env_top {
  env_data* env = nullptr;
  std::vector<top_target> targets;
};

std::string_view trim(std::string_view s) {
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

bool is_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    size_t at = s.find(sep, start);
    parts.push_back(s.substr(start, at - start));
    if (at == std::string::npos) return parts;
    start = at + 1;
  }
}

// Python's fnmatch.filter (POSIX: case-sensitive, `*` crosses dots, `\` is
// an ordinary character) over a sorted list.
std::vector<std::string> fnmatch_filter(const std::vector<std::string>& names,
                                        const std::string& pattern) {
  std::vector<std::string> out;
  if (pattern.find_first_of("*?[") == std::string::npos) {
    if (std::binary_search(names.begin(), names.end(), pattern)) out.push_back(pattern);
    return out;
  }
  for (const auto& n : names) {
    if (::fnmatch(pattern.c_str(), n.c_str(), FNM_NOESCAPE) == 0) out.push_back(n);
  }
  return out;
}

// Every file under `dir` (following symbolic links, as Salt's os.walk with
// followlinks does, but entering each directory once), as paths relative to
// the root.
void walk(const std::filesystem::path& dir, const std::string& rel,
          std::set<std::pair<dev_t, ino_t>>& seen, std::vector<std::string>& out) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return;
  if (!seen.insert({st.st_dev, st.st_ino}).second) return;
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec), end;
  std::vector<std::pair<std::string, bool>> children;
  for (; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    std::error_code sec;
    auto status = std::filesystem::status(it->path(), sec);  // follows links
    if (sec) continue;
    if (std::filesystem::is_directory(status)) {
      children.emplace_back(name, true);
    } else if (std::filesystem::is_regular_file(status)) {
      children.emplace_back(name, false);
    }
  }
  for (const auto& [name, is_dir] : children) {
    std::string child = rel.empty() ? name : rel + "/" + name;
    if (is_dir) {
      walk(dir / name, child, seen, out);
    } else {
      out.push_back(child);
    }
  }
}

// Salt's list_states: `a/b.sls` is `a.b`, `a/b/init.sls` is `a.b`.
std::vector<std::string> list_states(const std::vector<std::string>& roots) {
  std::vector<std::string> states;
  for (const auto& root : roots) {
    std::vector<std::string> files;
    std::set<std::pair<dev_t, ino_t>> seen;
    walk(root, "", seen, files);
    for (auto& f : files) {
      if (!f.ends_with(".sls")) continue;
      bool init = f.ends_with("/init.sls");
      std::replace(f.begin(), f.end(), '/', '.');
      f.resize(f.size() - (init ? 9 : 4));
      states.push_back(std::move(f));
    }
  }
  std::sort(states.begin(), states.end());
  states.erase(std::unique(states.begin(), states.end()), states.end());
  return states;
}

// Python's int() of a top file's `order` value, 0 when it is not a number.
int order_of(const ordered_json& v) {
  if (v.is_boolean()) return v.get<bool>() ? 1 : 0;
  if (v.is_number_integer()) return static_cast<int>(v.get<int64_t>());
  if (v.is_number_float()) return static_cast<int>(v.get<double>());
  if (v.is_string()) {
    std::string s(trim(v.get_ref<const std::string&>()));
    s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
    size_t digits = !s.empty() && (s[0] == '+' || s[0] == '-') ? 1 : 0;
    if (digits == s.size() || !std::all_of(s.begin() + static_cast<std::ptrdiff_t>(digits), s.end(),
                                           [](char c) { return c >= '0' && c <= '9'; })) {
      return 0;
    }
    try {
      return std::stoi(s);
    } catch (const std::out_of_range&) {
      return s[0] == '-' ? INT_MIN : INT_MAX;
    }
  }
  return 0;
}

std::string text_of(const ordered_json& key_or_item) {
  return key_or_item.is_string() ? key_or_item.get<std::string>() : key_or_item.dump();
}

}  // namespace

struct compiler::tree {
  // Distinct sets of matching targets whose results are kept.
  static constexpr size_t k_memo_limit = 4096;

  strategy merging = strategy::smart;
  bool merge_lists = false;
  options opts;  // as loaded, to read the tree again for a minion
  // A top or sls file met holds Jinja markup: compile() reads the tree
  // again for each minion (build_for), this one only serves load's checks.
  bool templated = false;
  // Set while a tree is read for one minion: what its templates see, and
  // the tree load() read, whose plain files and listings are reused.
  std::optional<std::string> minion_id;
  const tree* loaded = nullptr;
  render::value grains_v, pillar_v, opts_v, salt_v;
  std::shared_ptr<const void> salt_keep;  // what salt_v refers to
  // Keyed by path: a file is rendered once whatever names reach it.
  std::map<std::string, sls_file> files;
  std::map<std::string, env_data, std::less<>> envs;
  std::vector<env_top> top;  // environments in the order the top files name them
  size_t target_count = 0;   // over all of `top`
  std::vector<std::string> top_errors;

  // Without templates a pillar depends only on which targets match: results
  // are kept per set of matching targets (a bit per target, in `top` order).
  // Once pillar files are templates, a templated file's result will depend
  // on the minion and must not be kept.
  mutable std::shared_mutex memo_mutex;
  mutable std::unordered_map<std::string, std::shared_ptr<const result>> memo;

  // `pillar`: what pillar terms match (ext_pillar_first's data), or none.
  std::string match_key(std::string_view id, packed::value grains,
                        packed::value pillar = {}) const;
  result build(const std::string& key) const;

  env_data& env(const std::string& name) {
    auto [it, added] = envs.try_emplace(name);
    if (added) it->second.name = name;
    return it->second;
  }

  // The data of `path`, a file of environment `e` reached as sls `sls` ("" for
  // a top file); nullopt for a template when no minion is set (`templated`
  // is then set). Throws detail::render_error.
  template <class Json>
  std::optional<Json> read(const std::string& path, const env_data& e, const std::string& sls) {
    std::string text;
    try {
      text = base::read_file(path);
    } catch (const base::error& err) {
      throw detail::render_error("pillar file " + std::string(err.what()));
    }
    const render::pgp_decryptor* gpg = opts.gpg ? &opts.gpg : nullptr;
    if (!detail::is_template(text)) return detail::render_text<Json>(text, path, nullptr, gpg);
    templated = true;
    if (!minion_id) return std::nullopt;
    detail::template_context ctx{e.name, sls, e.roots, salt_v, grains_v, pillar_v, opts_v};
    return detail::render_text<Json>(text, path, &ctx, gpg);
  }

  const sls_file& file(const std::string& path, const env_data& e, const std::string& sls) {
    auto [it, added] = files.try_emplace(path);
    sls_file& f = it->second;
    if (!added) return f;
    f.path = path;
    if (loaded != nullptr) {
      // A plain file reads the same for every minion: load() parsed it.
      auto kept = loaded->files.find(path);
      if (kept != loaded->files.end() && !kept->second.is_template) {
        f = kept->second;
        return f;
      }
    }
    ordered_json data;
    try {
      auto got = read<ordered_json>(path, e, sls);
      if (!got) {
        f.is_template = true;  // rendered for each minion
        return f;
      }
      data = std::move(*got);
    } catch (const detail::render_error& err) {
      f.error = err.what();
      return f;
    }
    f.truthy = base::python_truth(data);
    if (!f.truthy) return f;  // own stays {}
    f.has_include = data.is_object() && data.contains("include");
    f.include_is_list = f.has_include && data["include"].is_array();
    if (f.include_is_list) {
      f.include = std::move(data["include"]);
      data.erase("include");
    }
    f.own = std::move(data);
    return f;
  }

  // Salt's get_state: `a.b` is a/b.sls in the first root that has it, else
  // a/b/init.sls in the first root that has that.
  std::pair<const sls_file*, bool> find(const env_data& e, const std::string& name) {
    std::string rel = name;
    std::replace(rel.begin(), rel.end(), '.', '/');
    // A leading dot would make the path absolute: outside every root.
    if (rel.empty() || rel[0] == '/') return {nullptr, false};
    for (bool init : {false, true}) {
      std::string candidate = rel + (init ? "/init.sls" : ".sls");
      for (const auto& root : e.roots) {
        std::string full = root + "/" + candidate;
        if (is_file(full)) return {&file(full, e, name), init};
      }
    }
    return {nullptr, false};
  }

  // Resolves `name` in `e`, and everything its includes reach.
  void resolve(env_data& e, const std::string& name) {
    std::vector<std::string> queue{name};
    while (!queue.empty()) {
      std::string n = std::move(queue.back());
      queue.pop_back();
      auto [it, added] = e.nodes.try_emplace(n);
      if (!added) continue;
      sls_node& node = it->second;
      auto [f, init] = find(e, n);
      node.file = f;
      if (f == nullptr || !f->include_is_list || !f->own.is_object()) continue;
      for (const auto& item : f->include) {
        node.includes.push_back(include(e, n, init, item));
        for (const auto& m : node.includes.back().names) queue.push_back(m);
      }
    }
  }

  // One item of sls `sls`'s include list, as render_pstate reads it.
  include_ref include(const env_data& e, const std::string& sls, bool init,
                      const ordered_json& item) {
    include_ref ref;
    std::string sub;
    if (item.is_string()) {
      sub = item.get<std::string>();
    } else if (item.is_object() && item.size() == 1 && item.begin().value().is_object()) {
      sub = item.begin().key();
      const ordered_json& opts = item.begin().value();
      // `defaults` are template variables; brine's pillar files have no
      // template markup, so they change nothing.
      if (auto k = opts.find("key"); k != opts.end() && base::python_truth(*k)) {
        if (!k->is_string()) {
          ref.error = "Include Declaration in SLS '" + sls + "': the key of '" + sub +
                      "' must be a string like a:b, got " + k->dump();
          return ref;
        }
        ref.key = split(k->get<std::string>(), ':');
      }
    } else {
      ref.error = "Include Declaration in SLS '" + sls +
                  "': each item must be an sls name or a mapping of one sls name to its "
                  "options (key, defaults), got " +
                  item.dump();
      return ref;
    }
    // Salt 3006 first matches the name without its leading dots (before
    // relative includes existed, `.b` meant the root's `b`), then the
    // relative name: `.b` in a.c brings in both `b` and `a.b` where both
    // exist. Kept, so that a tree compiles to what Salt compiles.
    std::string plain = sub.substr(std::min(sub.find_first_not_of('.'), sub.size()));
    std::replace(plain.begin(), plain.end(), '/', '.');
    ref.names = fnmatch_filter(e.avail, plain);
    if (sub.starts_with('.')) {
      std::vector<std::string> parts = split(sls, '.');
      if (!init) parts.pop_back();
      parts.push_back(sub.substr(1));
      sub.clear();
      for (size_t i = 0; i < parts.size(); ++i) sub += (i == 0 ? "" : ".") + parts[i];
    }
    auto relative = fnmatch_filter(e.avail, sub);
    ref.names.insert(ref.names.end(), relative.begin(), relative.end());
    if (ref.names.empty()) ref.names.push_back(sub);
    return ref;
  }

  // Salt's get_tops + merge_tops + sort_top_targets.
  void load_tops(const options& o, const std::vector<std::string>& saltenvs) {
    std::string top_name = o.state_top;
    if (top_name.starts_with("salt://")) top_name.erase(0, 7);
    while (top_name.starts_with('/')) top_name.erase(0, 1);

    struct top_file {
      std::string path;
      ordered_json data;
    };
    std::vector<top_file> tops;
    for (const auto& name : saltenvs) {
      env_data& e = env(name);
      std::vector<top_file> env_tops;
      for (const auto& root : e.roots) {
        std::string path = root + "/" + top_name;
        if (!is_file(path)) continue;
        try {
          if (auto data = read<ordered_json>(path, e, "")) env_tops.push_back({path, *data});
        } catch (const detail::render_error& err) {
          top_errors.push_back("Rendering Primary Top file failed, render error:\n" +
                               std::string(err.what()));
        }
        break;
      }
      // A top file's `include` names more top files (sls names in the same
      // environment); their own includes are not followed, as in Salt.
      std::vector<std::string> includes;
      for (auto& t : env_tops) {
        if (!t.data.is_object() || !t.data.contains("include")) continue;
        const auto& inc = t.data["include"];
        if (!inc.is_array()) {
          top_errors.push_back("Error encountered while rendering pillar top file " + t.path +
                               ": include must be a list of sls names");
        } else {
          for (const auto& s : inc) includes.push_back(text_of(s));
        }
        t.data.erase("include");
      }
      std::set<std::string> done;
      for (const auto& sls : includes) {
        if (!done.insert(sls).second) continue;
        auto [f, init] = find(e, sls);
        if (f == nullptr) continue;  // Salt renders nothing and says nothing
        try {
          if (auto data = read<ordered_json>(f->path, e, "")) env_tops.push_back({f->path, *data});
        } catch (const detail::render_error& err) {
          top_errors.push_back("Rendering Top file " + sls + " failed, render error:\n" +
                               std::string(err.what()));
        }
      }
      for (auto& t : env_tops) tops.push_back(std::move(t));
    }

    struct merged_target {
      std::string path;  // the top file that set it last
      ordered_json items;
      int order = 0;
    };
    // saltenv -> target -> items, both in first-appearance order.
    std::vector<std::pair<std::string, std::vector<std::pair<std::string, merged_target>>>> merged;
    auto slot = [&merged](const std::string& env, const std::string& tgt) -> merged_target& {
      auto e =
          std::find_if(merged.begin(), merged.end(), [&](const auto& p) { return p.first == env; });
      if (e == merged.end()) e = merged.insert(merged.end(), {env, {}});
      auto& targets = e->second;
      auto t = std::find_if(targets.begin(), targets.end(),
                            [&](const auto& p) { return p.first == tgt; });
      if (t == targets.end()) t = targets.insert(targets.end(), {tgt, {}});
      return t->second;
    };
    for (const auto& t : tops) {
      if (t.data.is_null()) continue;  // an empty top file
      if (!t.data.is_object()) {
        top_errors.push_back("Error encountered while rendering pillar top file " + t.path +
                             ": it must map environments to targets, got " +
                             std::string(t.data.type_name()));
        continue;
      }
      for (const auto& [saltenv, targets] : t.data.items()) {
        if (saltenv == "include") continue;  // an included top file's: not followed
        if (!targets.is_object()) {
          top_errors.push_back("Error encountered while rendering pillar top file " + t.path +
                               ": environment '" + saltenv +
                               "' must map targets to lists of sls names");
          continue;
        }
        for (const auto& [tgt, items] : targets.items()) {
          if (!items.is_array()) {
            top_errors.push_back("Error encountered while rendering pillar top file " + t.path +
                                 ": environment '" + saltenv + "', target '" + tgt +
                                 "' must map to a list of sls names");
            continue;
          }
          merged_target& m = slot(saltenv, tgt);
          m.path = t.path;
          m.items = items;
          m.order = 0;
          bool ignore_missing = false;
          for (const auto& comp : items) {
            if (!comp.is_object()) continue;
            if (comp.contains("order")) m.order = order_of(comp["order"]);
            if (comp.contains("ignore_missing") && base::python_truth(comp["ignore_missing"])) {
              ignore_missing = true;
            }
          }
          if (ignore_missing) {
            env_data& e = env(saltenv);
            for (const auto& comp : items) {
              if (comp.is_string()) e.ignored.insert(comp.get<std::string>());
            }
          }
        }
      }
    }

    for (auto& [saltenv, targets] : merged) {
      // top_matches: with a pillarenv, only that environment's targets.
      if (o.pillarenv && saltenv != *o.pillarenv) continue;
      std::stable_sort(targets.begin(), targets.end(), [](const auto& a, const auto& b) {
        return a.second.order < b.second.order;
      });
      env_top et{&env(saltenv), {}};
      for (auto& [tgt, m] : targets) {
        et.targets.push_back(target_of(o, saltenv, tgt, m.path, m.items));
      }
      target_count += et.targets.size();
      top.push_back(std::move(et));
    }
  }

  // One target of the merged top: its matcher (the last `match` item, else
  // compound, as confirm_top) parsed now; its sls names in order, once each.
  top_target target_of(const options& o, const std::string& saltenv, const std::string& tgt,
                       const std::string& path, const ordered_json& items) {
    top_target t;
    t.text = tgt;
    std::string matcher = "compound";
    bool matcher_ok = true;
    for (const auto& comp : items) {
      if (comp.is_string()) {
        const auto& s = comp.get_ref<const std::string&>();
        if (std::find(t.sls.begin(), t.sls.end(), s) == t.sls.end()) t.sls.push_back(s);
      } else if (comp.is_object() && comp.contains("match")) {
        matcher_ok = comp["match"].is_string();
        matcher = text_of(comp["match"]);
      }
    }
    std::string where = "Error encountered while rendering pillar top file " + path +
                        ": environment '" + saltenv + "', target '" + tgt + "': ";
    auto kind = target::parse_type(matcher);
    if (!matcher_ok || !kind) {
      top_errors.push_back(where + "unknown match type '" + matcher +
                           "'; brine matches glob, pcre, list, grain, grain_pcre, pillar, "
                           "pillar_pcre, ipcidr, nodegroup and compound");
      return t;
    }
    try {
      t.expr = target::expression::parse(tgt, *kind, o.groups);
    } catch (const target::error& e) {
      top_errors.push_back(where + e.what());
    }
    return t;
  }
};

namespace {

// One minion's rendering of one environment: Salt's render_pstate with its
// `mods`, the sls already rendered for this minion in this environment.
class renderer {
 public:
  renderer(const compiler::tree& t, const env_data& e, std::deque<ordered_json>& arena,
           std::vector<std::string>& errors)
      : t_(t), e_(e), arena_(arena), errors_(errors) {}

  // The sls's data merged over its includes' data; null for Salt's None
  // (missing, or failed to render).
  const ordered_json* render(const std::string& name) {
    const sls_node& node = e_.nodes.at(name);
    if (node.file == nullptr) {
      if (e_.ignored.contains(name)) return nullptr;
      if (e_.has_roots) {
        errors_.push_back("Specified SLS '" + name + "' in environment '" + e_.name +
                          "' is not available on the salt master");
      }
      // Salt says nothing either when the environment has no roots: its
      // top file may name environments another master serves.
      return nullptr;
    }
    const sls_file& f = *node.file;
    if (!f.error.empty()) {
      errors_.push_back("Rendering SLS '" + name + "' failed, render error:\n" + f.error);
      mods_[name] = nullptr;
      return nullptr;
    }
    mods_[name] = &f.own;
    if (!f.truthy) return &f.own;
    if (!f.own.is_object()) {
      errors_.push_back("SLS '" + name + "' does not render to a dictionary");
      return &f.own;
    }
    if (!f.has_include) return &f.own;
    if (!f.include_is_list) {
      errors_.push_back("Include Declaration in SLS '" + name + "' is not formed as a list");
      return &f.own;
    }
    std::vector<const ordered_json*> layers;
    for (const auto& inc : node.includes) {
      if (!inc.error.empty()) {
        errors_.push_back(inc.error);
        continue;
      }
      for (const auto& m : inc.names) {
        auto done = mods_.find(m);
        const ordered_json* sub = done != mods_.end() ? done->second : render(m);
        if (sub == nullptr || !base::python_truth(*sub)) continue;
        if (!inc.key.empty()) {
          ordered_json nested = *sub;
          for (auto k = inc.key.rbegin(); k != inc.key.rend(); ++k) {
            ordered_json outer = ordered_json::object();
            outer[*k] = std::move(nested);
            nested = std::move(outer);
          }
          sub = &arena_.emplace_back(std::move(nested));
        }
        // Salt would fail on merging a non-mapping; its error is reported.
        if (sub->is_object()) layers.push_back(sub);
      }
    }
    // The including file is laid last: its values win.
    if (layers.empty()) return &f.own;
    ordered_json& state = arena_.emplace_back(*layers.front());
    for (size_t i = 1; i < layers.size(); ++i) {
      detail::merge(state, *layers[i], t_.merging, t_.merge_lists);
    }
    detail::merge(state, f.own, t_.merging, t_.merge_lists);
    return &state;
  }

 private:
  const compiler::tree& t_;
  const env_data& e_;
  std::deque<ordered_json>& arena_;
  std::vector<std::string>& errors_;
  std::unordered_map<std::string_view, const ordered_json*> mods_;
};

}  // namespace

namespace {

// The tree of `o`, for the minion `id` with `grains` when `id` is set;
// `loaded` (the tree load() read) lends its plain files and sls listings.
std::shared_ptr<compiler::tree> build_tree(const options& o, std::optional<std::string_view> id,
                                           const json& grains,
                                           const compiler::tree* loaded = nullptr,
                                           const ordered_json* pillar = nullptr) {
  auto t = std::make_shared<compiler::tree>();
  t->opts = o;
  t->loaded = loaded;
  if (id) {
    t->minion_id = std::string(*id);
    json opts = o.opts.is_object() ? o.opts : json::object();
    opts["id"] = *id;
    opts["grains"] = grains;
    // Salt's opts["pillar"]: empty, or with ext_pillar_first the ext_pillar data.
    if (pillar != nullptr) opts["pillar"] = json(*pillar);
    t->grains_v = render::value::from_json(ordered_json(grains));
    t->pillar_v = pillar != nullptr ? render::value::from_json(*pillar) : render::value::make_dict();
    t->opts_v = render::value::from_json(ordered_json(opts));
    if (o.salt) {
      auto s = o.salt(*id, grains);
      t->salt_v = std::move(s.salt);
      t->salt_keep = std::move(s.keep);
    } else {
      t->salt_v = render::value::undefined("'salt' is undefined");
    }
  }
  auto merging = parse_strategy(o.merging_strategy);
  if (!merging) {
    throw base::error(
        "pillar_source_merging_strategy must be one of smart, recurse, aggregate, "
        "overwrite, none; got '" +
        o.merging_strategy + "'");
  }
  t->merging = *merging;
  t->merge_lists = o.merge_lists;
  if (o.pillarenv && !o.roots.contains(*o.pillarenv)) {
    std::string known;
    for (const auto& [name, dirs] : o.roots) known += (known.empty() ? "" : ", ") + name;
    throw base::error("pillarenv '" + *o.pillarenv + "' is not an environment of pillar_roots (" +
                      (known.empty() ? "none defined" : known) +
                      "); add it to pillar_roots or unset pillarenv");
  }

  // Salt's _get_envs: base first, then pillar_roots' environments.
  std::vector<std::string> saltenvs{"base"};
  for (const auto& [name, dirs] : o.roots) {
    if (name != "base") saltenvs.push_back(name);
  }
  for (const auto& name : saltenvs) {
    env_data& e = t->env(name);
    if (auto r = o.roots.find(name); r != o.roots.end()) e.roots = r->second;
    e.has_roots = !e.roots.empty();
    e.listed = true;
    const env_data* was = nullptr;
    if (loaded != nullptr) {
      if (auto k = loaded->envs.find(name); k != loaded->envs.end()) was = &k->second;
    }
    e.avail = was != nullptr ? was->avail : list_states(e.roots);
  }

  // get_tops: Salt reads them from a set of environments, in no fixed order;
  // here base first, then the others in name order.
  if (o.pillarenv) {
    saltenvs = {*o.pillarenv};
  } else if (t->merging == strategy::none) {
    saltenvs = {"base"};
  }
  t->load_tops(o, saltenvs);

  for (auto& et : t->top) {
    env_data& e = *et.env;
    for (const auto& tt : et.targets) {
      for (const auto& pattern : tt.sls) {
        if (e.expansions.contains(pattern)) continue;
        auto names = e.listed ? fnmatch_filter(e.avail, pattern) : std::vector<std::string>{};
        if (names.empty()) names.push_back(pattern);
        for (const auto& n : names) t->resolve(e, n);
        e.expansions.emplace(pattern, std::move(names));
      }
    }
  }
  return t;
}

}  // namespace

std::vector<options::ext_entry> parse_ext_pillar(
    const json& option, const std::map<std::string, options::ext_function, std::less<>>& known) {
  std::vector<options::ext_entry> out;
  if (option.is_null()) return out;
  auto names = [&] {
    std::string list;
    for (const auto& [name, fn] : known) list += (list.empty() ? "" : ", ") + name;
    return list;
  };
  if (!option.is_array()) {
    throw base::error(
        "ext_pillar must be a list of one-key mappings, e.g. \"- cmd_json: 'echo {}'\"");
  }
  for (size_t i = 0; i < option.size(); ++i) {
    const json& item = option[i];
    if (!item.is_object() || item.empty()) {
      throw base::error("ext_pillar item " + std::to_string(i + 1) +
                        " must be a mapping of an interface to its configuration, got " +
                        item.dump() + " (interfaces: " + names() + ")");
    }
    for (const auto& [name, config] : item.items()) {
      if (!known.contains(name)) {
        throw base::error("ext_pillar item " + std::to_string(i + 1) + ": interface '" + name +
                          "' is unavailable in brine; use one of " + names());
      }
      out.push_back({name, ordered_json(config)});
    }
  }
  return out;
}

compiler compiler::load(options o) { return compiler(build_tree(o, std::nullopt, json::object())); }

std::string compiler::tree::match_key(std::string_view id, packed::value grains,
                                      packed::value pillar) const {
  static const packed::document k_no_grains{json::object()};
  target::minion_data data{grains ? grains : k_no_grains.root(),
                           pillar ? pillar : k_no_grains.root()};
  std::string key((target_count + 7) / 8, '\0');
  size_t i = 0;
  for (const env_top& et : top) {
    for (const auto& tt : et.targets) {
      if (tt.expr && tt.expr->matches(id, data, false))
        key[i / 8] |= static_cast<char>(1 << (i % 8));
      ++i;
    }
  }
  return key;
}

compiler::result compiler::tree::build(const std::string& key) const {
  result r{json::object(), ordered_json::object(), {}};
  std::deque<ordered_json> arena;
  std::vector<const std::string*> patterns;
  size_t i = 0;
  for (const env_top& et : top) {
    // top_matches: the sls entries of the matching targets, once each.
    patterns.clear();
    for (const auto& tt : et.targets) {
      bool hit = (key[i / 8] >> (i % 8)) & 1;
      ++i;
      if (!hit) continue;
      for (const auto& s : tt.sls) {
        if (std::none_of(patterns.begin(), patterns.end(), [&](auto* p) { return *p == s; })) {
          patterns.push_back(&s);
        }
      }
    }
    if (patterns.empty()) continue;
    // render_pillar
    const env_data& e = *et.env;
    if (!e.listed) {
      for (size_t n = 0; n < patterns.size(); ++n) {
        r.errors.push_back("No matching pillar environment for environment '" + e.name + "' found");
      }
    }
    renderer rd(*this, e, arena, r.errors);
    for (const auto* p : patterns) {
      for (const auto& name : e.expansions.at(*p)) {
        const ordered_json* state = rd.render(name);
        if (state != nullptr && state->is_object()) {
          detail::merge(r.ordered, *state, merging, merge_lists);
        }
      }
    }
  }
  r.errors.insert(r.errors.end(), top_errors.begin(), top_errors.end());
  r.pillar = json(r.ordered);
  return r;
}

std::shared_ptr<const compiler::result> compiler::compile_shared(std::string_view id,
                                                                 const json* grains) const {
  packed::document packed_grains;
  if (grains != nullptr) packed_grains = packed::document(*grains);
  return compile_shared(id, packed_grains.root());
}

namespace {

const char* type_name(const ordered_json& v) {
  if (v.is_array()) return "a list";
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number()) return "a number";
  return "a value";
}

// Salt's Pillar.ext_pillar: each entry's data laid over `pillar` in turn,
// with the pillar's merging strategy; what fails is an error and the rest
// goes on.
void run_ext_pillar(const options& o, std::string_view id, packed::value grains, strategy merging,
                    bool merge_lists, ordered_json& pillar, std::vector<std::string>& errors) {
  for (const auto& entry : o.ext_pillar) {
    auto fn = o.ext_pillars.find(entry.name);
    if (fn == o.ext_pillars.end()) {
      errors.push_back("Specified ext_pillar interface " + entry.name + " is unavailable");
      continue;
    }
    ordered_json ext;
    try {
      ext = fn->second({id, grains, pillar, entry.config});
    } catch (const std::exception& e) {
      errors.push_back("Failed to load ext_pillar " + entry.name + ": " + e.what());
      continue;
    }
    if (!base::python_truth(ext)) continue;
    if (!ext.is_object()) {
      errors.push_back("Failed to load ext_pillar " + entry.name + ": it gave " + type_name(ext) +
                       ", not a dictionary");
      continue;
    }
    detail::merge(pillar, ext, merging, merge_lists);
  }
}

}  // namespace

std::shared_ptr<const compiler::result> compiler::compile_tree(std::string_view id,
                                                               packed::value grains,
                                                               const ordered_json* ext,
                                                               size_t& top_errors) const {
  const tree& t = *t_;
  packed::document ext_packed;
  if (ext != nullptr) ext_packed = packed::document(json(*ext));
  if (t.templated) {
    // Salt renders every template for each minion: nothing is shared.
    auto mine = build_tree(t.opts, id, grains ? grains.to_json() : json::object(), &t, ext);
    top_errors = mine->top_errors.size();
    return std::make_shared<const result>(
        mine->build(mine->match_key(id, grains, ext_packed.root())));
  }
  top_errors = t.top_errors.size();
  std::string key = t.match_key(id, grains, ext_packed.root());
  {
    std::shared_lock lock(t.memo_mutex);
    if (auto it = t.memo.find(key); it != t.memo.end()) return it->second;
  }
  auto r = std::make_shared<const result>(t.build(key));
  std::unique_lock lock(t.memo_mutex);
  // A fleet where nearly every minion matches its own set of targets would
  // only fill memory: start over rather than grow without bound.
  if (t.memo.size() >= tree::k_memo_limit) t.memo.clear();
  t.memo.emplace(std::move(key), r);
  return r;
}

std::shared_ptr<const compiler::result> compiler::compile_shared(std::string_view id,
                                                                 packed::value grains) const {
  const tree& t = *t_;
  size_t top_errors = 0;
  if (t.opts.ext_pillar.empty()) return compile_tree(id, grains, nullptr, top_errors);
  // Salt's compile_pillar with ext_pillar: each minion's data is its own.
  auto r = std::make_shared<result>();
  if (t.opts.ext_pillar_first) {
    // The ext_pillar data first, from nothing; the top file's targets and
    // templates then see it as the pillar, and the sls data goes over it.
    ordered_json ext = ordered_json::object();
    run_ext_pillar(t.opts, id, grains, t.merging, t.merge_lists, ext, r->errors);
    auto tops = compile_tree(id, grains, &ext, top_errors);
    r->ordered = std::move(ext);
    detail::merge(r->ordered, tops->ordered, t.merging, t.merge_lists);
    r->errors.insert(r->errors.end(), tops->errors.begin(), tops->errors.end());
  } else {
    auto tops = compile_tree(id, grains, nullptr, top_errors);
    r->ordered = tops->ordered;
    // render errors, then ext_pillar's, then the top file's, as Salt lists them.
    auto top_begin = tops->errors.end() - static_cast<std::ptrdiff_t>(top_errors);
    r->errors.assign(tops->errors.begin(), top_begin);
    run_ext_pillar(t.opts, id, grains, t.merging, t.merge_lists, r->ordered, r->errors);
    r->errors.insert(r->errors.end(), top_begin, tops->errors.end());
  }
  r->pillar = json(r->ordered);
  return r;
}

compiler::result compiler::compile(std::string_view id, const json* grains) const {
  return *compile_shared(id, grains);
}

}  // namespace brine::pillar
