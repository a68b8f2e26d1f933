#include "state/highstate.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <list>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <unordered_map>

#include "base/python.h"
#include "base/python_truth.h"
#include "modules/data.h"
#include "render/render.h"
#include "render/salt_filters.h"
#include "render/yaml.h"
#include "state/gpg.h"

namespace brine::state {

namespace fs = std::filesystem;

namespace {

// Roughly what `j` holds on the heap: nlohmann's 16-byte values, the
// ordered maps' (key, value) pairs and the strings longer than the small
// buffer. Parsed YAML takes ten to twenty times its text.
std::size_t heap_bytes(const json& j) {
  auto text = [](const std::string& s) { return s.size() > 15 ? s.capacity() + 1 : 0; };
  switch (j.type()) {
    case json::value_t::object: {
      std::size_t n = sizeof(json::object_t);
      for (const auto& [k, v] : j.items()) {
        n += sizeof(std::string) + text(k) + sizeof(json) + heap_bytes(v);
      }
      return n;
    }
    case json::value_t::array: {
      std::size_t n = sizeof(json::array_t);
      for (const auto& v : j) n += sizeof(json) + heap_bytes(v);
      return n;
    }
    case json::value_t::string:
      return sizeof(std::string) + text(j.get_ref<const std::string&>());
    default:
      return 0;
  }
}

// The data of Salt's yaml renderer for a rendered text, shared by all the
// compiles of the process: a master compiling for many minions parses the
// same text again and again wherever their templates render alike (and a
// `#!yaml` sls always). Keyed by the file and the text itself; the least
// recently used go once what the entries hold (texts and data) passes a
// bound. Thread-safe; an error is not cached.
class yaml_cache {
 public:
  void clear() {
    std::lock_guard lock(mu_);
    index_.clear();
    lru_.clear();
    bytes_ = 0;
  }

  json load(const std::string& text, const std::string& path) {
    std::string key = path + '\0' + text;
    {
      std::lock_guard lock(mu_);
      if (auto it = index_.find(key); it != index_.end()) {
        lru_.splice(lru_.begin(), lru_, it->second);
        return it->second->data;
      }
    }
    json data = render::load_yaml<json>(text, path);
    std::size_t size = key.size() + heap_bytes(data);
    if (size > k_bytes / 4) return data;
    std::lock_guard lock(mu_);
    if (index_.contains(key)) return data;
    lru_.push_front(entry{std::move(key), data, size});
    index_.emplace(lru_.front().key, lru_.begin());
    bytes_ += size;
    while (bytes_ > k_bytes) {
      bytes_ -= lru_.back().size;
      index_.erase(lru_.back().key);
      lru_.pop_back();
    }
    return data;
  }

 private:
  struct entry {
    std::string key;
    json data;
    std::size_t size;  // key and data, as heap_bytes counts them
  };
  static constexpr std::size_t k_bytes = std::size_t{16} << 20;
  std::mutex mu_;
  std::list<entry> lru_;  // the index's keys view these strings
  std::unordered_map<std::string_view, std::list<entry>::iterator> index_;
  std::size_t bytes_ = 0;
};

yaml_cache& sls_yaml_cache() {
  static yaml_cache cache;
  return cache;
}

json load_sls_yaml(const std::string& text, const std::string& path) {
  return sls_yaml_cache().load(text, path);
}

std::string strip(std::string_view s) {
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return std::string(s);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) break;
    start = at + 1;
  }
  return out;
}

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

std::optional<std::string> read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> fnmatch_filter(const std::vector<std::string>& names,
                                        const std::string& pattern) {
  std::vector<std::string> out;
  for (const auto& n : names) {
    if (modules::fnmatch(pattern, n)) out.push_back(n);
  }
  return out;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

std::vector<std::string> parse_pipe(const std::string& pipe) {
  static const std::map<std::string, std::string> old_style = {
      {"yaml_jinja", "jinja|yaml"}, {"yaml_mako", "mako|yaml"}, {"yaml_wempy", "wempy|yaml"},
      {"json_jinja", "jinja|json"}, {"json_mako", "mako|json"}, {"json_wempy", "wempy|json"}};
  std::string p = pipe;
  if (auto it = old_style.find(strip(p)); it != old_style.end()) p = it->second;
  std::vector<std::string> names;
  for (const auto& part : split(p, '|')) {
    std::string s = strip(part);
    names.push_back(s.substr(0, s.find(' ')));
  }
  return names;
}

options options::from_opts(const nlohmann::json& opts) {
  options o;
  if (!opts.is_object()) return o;
  if (auto fr = opts.find("file_roots"); fr != opts.end() && fr->is_object()) {
    o.file_roots.clear();
    for (const auto& [env, dirs] : fr->items()) {
      std::vector<std::string> d;
      if (dirs.is_array()) {
        for (const auto& x : dirs) {
          if (x.is_string()) d.push_back(x.get<std::string>());
        }
      } else if (dirs.is_string()) {
        d.push_back(dirs.get<std::string>());
      }
      o.file_roots.emplace_back(env, std::move(d));
    }
    // Salt's _get_envs puts base first whatever the order.
    std::stable_partition(o.file_roots.begin(), o.file_roots.end(),
                          [](const auto& e) { return e.first == "base"; });
  }
  auto str = [&](const char* k) -> std::optional<std::string> {
    auto it = opts.find(k);
    if (it == opts.end() || it->is_null()) return std::nullopt;
    if (it->is_string()) return it->get<std::string>();
    return it->dump();
  };
  if (auto v = str("state_top")) {
    std::string t = *v;
    if (t.starts_with("salt://")) t = t.substr(7);
    while (t.starts_with("/")) t = t.substr(1);
    o.state_top = t;
  }
  if (auto v = str("saltenv")) o.saltenv = v;
  if (auto v = str("state_top_saltenv")) o.state_top_saltenv = v;
  if (auto v = str("top_file_merging_strategy")) o.top_file_merging_strategy = *v;
  if (auto v = str("default_top")) o.default_top = v;
  if (auto v = str("renderer")) o.renderer = *v;
  o.gpg = gpg_decryptor_of(opts);
  if (auto it = opts.find("env_order"); it != opts.end() && it->is_array()) {
    for (const auto& e : *it) {
      if (e.is_string()) o.env_order.push_back(e.get<std::string>());
    }
  }
  if (auto it = opts.find("master_tops_first"); it != opts.end() && it->is_boolean()) {
    o.master_tops_first = it->get<bool>();
  }
  if (auto it = opts.find("state_auto_order"); it != opts.end() && it->is_boolean()) {
    o.state_auto_order = it->get<bool>();
  }
  if (auto it = opts.find("disabled_requisites"); it != opts.end()) {
    if (it->is_array()) {
      for (const auto& e : *it) {
        if (e.is_string()) o.disabled_requisites.push_back(e.get<std::string>());
      }
    } else if (it->is_string()) {
      o.disabled_requisites.push_back(it->get<std::string>());
    }
  }
  if (auto it = opts.find("jinja_trim_blocks"); it != opts.end() && it->is_boolean()) {
    o.jinja_trim_blocks = it->get<bool>();
  }
  if (auto it = opts.find("jinja_lstrip_blocks"); it != opts.end() && it->is_boolean()) {
    o.jinja_lstrip_blocks = it->get<bool>();
  }
  if (auto it = opts.find("nodegroups"); it != opts.end() && it->is_object()) {
    try {
      o.nodegroups = target::nodegroups_from_json(*it);
    } catch (const std::exception&) {
      // A bad nodegroup fails only the N@ terms that name it.
    }
  }
  return o;
}

struct compiler::impl {
  options o;
  minion m;
  render::value salt;
  render::value grains_v, pillar_v, opts_v;
  int iorder = 10000;

  impl(options opt, minion mi)
      : o(std::move(opt)), m(std::move(mi)), salt(render::value::undefined("'salt' is undefined")) {
    grains_v = render::value::from_json(m.grains);
    pillar_v = render::value::from_json(m.pillar);
    if (m.pillar_ordered_dicts) {
      for (const auto& [k, v] : pillar_v.dict().entries) render::mark_ordered_dicts(v);
    }
    opts_v = render::value::from_json(m.opts);
  }

  const std::vector<std::string>* roots(const std::string& env) const {
    for (const auto& [e, dirs] : o.file_roots) {
      if (e == env) return &dirs;
    }
    return nullptr;
  }

  // Salt's _get_envs: base, then the file_roots environments, or env_order.
  std::vector<std::string> envs() const {
    std::vector<std::string> client;
    for (const auto& [e, d] : o.file_roots) client.push_back(e);
    std::vector<std::string> order;
    for (const auto& e : o.env_order) {
      if (!contains(order, e)) order.push_back(e);
    }
    if (!order.empty() && !client.empty()) {
      std::vector<std::string> out;
      for (const auto& e : order) {
        if (contains(client, e)) out.push_back(e);
      }
      return out;
    }
    if (!order.empty()) return order;
    std::vector<std::string> out = {"base"};
    for (const auto& e : client) {
      if (!contains(out, e)) out.push_back(e);
    }
    return out;
  }

  bool env_available(const std::string& env) const { return contains(envs(), env); }

  // The tree is listed once per compile, as Salt's file client caches its
  // listing: the includes of a formula ask for it again and again.
  mutable std::map<std::string, std::vector<std::string>, std::less<>> files_memo, states_memo;

  const std::vector<std::string>& list_files(const std::string& env) const {
    if (auto it = files_memo.find(env); it != files_memo.end()) return it->second;
    std::set<std::string> out;
    if (const auto* dirs = roots(env)) {
      for (const auto& d : *dirs) {
        std::error_code ec;
        fs::recursive_directory_iterator it(d, fs::directory_options::follow_directory_symlink, ec);
        if (ec) continue;
        const fs::path root(d);
        for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
          if (ec) break;
          std::error_code fec;
          if (!it->is_regular_file(fec)) continue;
          // Lexically: fs::relative would resolve symbolic links with a
          // readlink per path component of every file.
          out.insert(it->path().lexically_relative(root).generic_string());
        }
      }
    }
    return files_memo.emplace(env, std::vector<std::string>(out.begin(), out.end()))
        .first->second;
  }

  const std::vector<std::string>& list_states(const std::string& env) const {
    if (auto it = states_memo.find(env); it != states_memo.end()) return it->second;
    std::set<std::string> states;
    for (const auto& path : list_files(env)) {
      if (!path.ends_with(".sls")) continue;
      std::string dotted = path;
      std::replace(dotted.begin(), dotted.end(), '/', '.');
      if (path.ends_with("/init.sls")) {
        states.insert(dotted.substr(0, dotted.size() - 9));
      } else {
        states.insert(dotted.substr(0, dotted.size() - 4));
      }
    }
    return states_memo.emplace(env, std::vector<std::string>(states.begin(), states.end()))
        .first->second;
  }

  std::optional<std::string> find_file(std::string rel, const std::string& env) const {
    if (rel.starts_with("salt://")) rel = rel.substr(7);
    if (auto q = rel.find('?'); q != std::string::npos) rel = rel.substr(0, q);
    while (rel.starts_with("/")) rel = rel.substr(1);
    if (rel.empty()) return std::nullopt;
    for (const auto& part : split(rel, '/')) {
      if (part == "..") return std::nullopt;
    }
    const auto* dirs = roots(env);
    if (!dirs) return std::nullopt;
    for (const auto& d : *dirs) {
      fs::path p = fs::path(d) / rel;
      std::error_code ec;
      if (fs::is_regular_file(p, ec)) return p.string();
    }
    return std::nullopt;
  }

  // Salt's get_state: {source, dest} or nullopt.
  std::optional<std::pair<std::string, std::string>> get_state(const std::string& sls,
                                                               const std::string& env) const {
    std::string path = sls;
    std::replace(path.begin(), path.end(), '.', '/');
    for (const auto& rel : {path + ".sls", path + "/init.sls"}) {
      if (auto dest = find_file(rel, env)) return std::make_pair("salt://" + rel, *dest);
    }
    return std::nullopt;
  }

  // salt.utils.templates.generate_sls_context.
  static json sls_context(const std::string& tmplpath, const std::string& sls) {
    json c = json::object();
    std::string slspath = sls;
    std::replace(slspath.begin(), slspath.end(), '.', '/');
    if (!tmplpath.empty()) {
      std::string tmpl = tmplpath;
      if (sls.empty()) {
        tmpl = tmpl.substr(tmpl.rfind('/') == std::string::npos ? 0 : tmpl.rfind('/') + 1);
      } else if (tmpl.ends_with(slspath + ".sls")) {
        tmpl = tmpl.substr(tmpl.size() - (4 + slspath.size()));
      } else if (tmpl.ends_with(slspath + "/init.sls")) {
        tmpl = tmpl.substr(tmpl.size() - (9 + slspath.size()));
      }
      auto slash = tmpl.rfind('/');
      slspath = slash == std::string::npos ? "" : tmpl.substr(0, slash);
      std::string dot = slspath;
      std::replace(dot.begin(), dot.end(), '/', '.');
      c["tplpath"] = tmplpath;
      c["tplfile"] = tmpl;
      c["tpldir"] = slspath.empty() ? "." : slspath;
      c["tpldot"] = dot;
    }
    auto repl = [&](char to) {
      std::string s = slspath;
      std::replace(s.begin(), s.end(), '/', to);
      return s;
    };
    c["slspath"] = slspath;
    c["slsdotpath"] = repl('.');
    c["slscolonpath"] = repl(':');
    c["sls_path"] = repl('_');
    return c;
  }

  // Salt's compile_template for a file: the data its renderer pipe makes.
  // Throws render_failure.
  json compile_template(const std::string& path, const std::string& saltenv,
                        const std::string& sls, const std::string& default_pipe,
                        const json& kwargs = json::object()) {
    auto text = read_text(path);
    if (!text) return json::object();
    if (strip(*text).empty()) return json::object();
    std::string first = text->substr(0, text->find('\n'));
    std::vector<std::string> pipe;
    if (first.starts_with("#!") && !first.starts_with("#!/")) {
      pipe = parse_pipe(strip(first).substr(2));
    } else {
      pipe = parse_pipe(default_pipe);
    }
    for (const auto& r : pipe) {
      if (std::string refusal = render::python_renderer_refusal(r, path); !refusal.empty()) {
        throw render_failure(refusal);
      }
      if (r != "jinja" && r != "yaml" && r != "json" && r != "gpg") {
        throw render_failure("renderer '" + r + "' (in " + path +
                             ") is not supported by brine; it renders the jinja, yaml, json "
                             "and gpg renderers (#!jinja|yaml, #!yaml, #!json, #!jinja|json, "
                             "#!yaml|gpg)");
      }
    }
    bool is_text = true;
    json data;
    std::string current = *text;
    for (const auto& r : pipe) {
      if (r == "gpg") {
        // Salt's gpg renderer takes text or data: its blocks decrypted.
        if (!o.gpg) {
          throw render_failure("renderer 'gpg' (in " + path +
                               ") needs the minion's gpg settings, which this compile lacks");
        }
        try {
          if (is_text) {
            current = render::decrypt_pgp_text(current, o.gpg);
          } else {
            render::decrypt_pgp(data, o.gpg);
          }
        } catch (const base::error& e) {
          throw render_failure(e.what());
        }
        continue;
      }
      if (!is_text) {
        throw render_failure("renderer '" + r + "' (in " + path +
                             ") needs text, but the renderer before it made data");
      }
      if (r == "jinja") {
        current = render_jinja(current, path, saltenv, sls, kwargs);
      } else if (r == "yaml") {
        try {
          data = load_sls_yaml(current, path);
        } catch (const render::yaml_error& e) {
          // Salt's yaml renderer reports PyYAML's error text, not a position prefix.
          throw render_failure(e.salt_message());
        }
        if (!base::python_truth(data)) data = json::object();
        is_text = false;
      } else {
        // Salt's json renderer drops a first line that starts with #!.
        if (current.starts_with("#!")) {
          auto nl = current.find('\n');
          current = nl == std::string::npos ? "" : current.substr(nl + 1);
        }
        if (strip(current).empty()) {
          data = json::object();
          is_text = false;
          continue;
        }
        try {
          data = json::parse(current);
        } catch (const std::exception& e) {
          throw render_failure(std::string("json: ") + e.what());
        }
        is_text = false;
      }
    }
    if (is_text) return json(current);
    return data;
  }

  // The name a template has for the loader: its path below the root of
  // its environment.
  std::string relative_name(const std::string& path, const std::string& saltenv) const {
    if (const auto* dirs = roots(saltenv)) {
      for (const auto& d : *dirs) {
        auto rel = fs::path(path).lexically_normal().lexically_relative(
            fs::path(d).lexically_normal());
        if (!rel.empty() && !rel.generic_string().starts_with("..")) {
          return rel.generic_string();
        }
      }
    }
    return path;
  }

  std::string render_jinja(const std::string& text, const std::string& path,
                           const std::string& saltenv, const std::string& sls,
                           const json& kwargs) {
    render::context ctx;
    ctx["salt"] = salt;
    ctx["grains"] = grains_v;
    ctx["pillar"] = pillar_v;
    ctx["opts"] = opts_v;
    ctx["saltenv"] = render::value(saltenv);
    ctx["sls"] = render::value(sls);
    for (const auto& [k, v] : kwargs.items()) ctx[k] = render::value::from_json(v);
    std::string the_sls = ctx["sls"].is_string() ? ctx["sls"].as_string() : sls;
    json derived = sls_context(path, the_sls);
    for (const auto& [k, v] : derived.items()) {
      if (!ctx.contains(k)) ctx[k] = render::value::from_json(v);
    }
    render::environment env = render::environment::salt();
    env.trim_blocks = o.jinja_trim_blocks;
    env.lstrip_blocks = o.jinja_lstrip_blocks;
    env.globals = ctx;
    env.loader = [this, saltenv](const std::string& name,
                                 const std::string&) -> std::optional<std::string> {
      auto p = find_file(name, saltenv);
      if (!p) return std::nullopt;
      return read_text(*p);
    };
    env.yaml_loader = [](std::string_view t, const std::string& n) {
      return render::load_yaml<json>(t, n);
    };
    // Salt's own tojson/unique/min/max and the rest of its filters (the
    // engine's); yaml_loader is set above.
    render::use_salt_dialect(env);
    try {
      return render::render(text, relative_name(path, saltenv), ctx, env);
    } catch (const render::template_error& e) {
      throw render_failure(jinja_failure(e.what(), text));
    }
  }

  // Salt's SaltRenderError text for a Jinja failure: the kind, the message,
  // and the lines around the failing one (salt.utils.stringutils.get_context).
  static std::string jinja_failure(const std::string& what, const std::string& source) {
    static const std::regex located(R"(^template '[^']*' line (\d+)(?: column \d+)?: ([\s\S]*)$)");
    std::smatch m;
    std::string message = what;
    int line = 0;
    if (std::regex_match(what, m, located)) {
      line = std::stoi(m[1]);
      message = m[2];
    }
    std::string kind = "Jinja error: ";
    if (message.find("is undefined") != std::string::npos ||
        message.find("has no attribute") != std::string::npos) {
      kind = "Jinja variable ";
    } else if (message.starts_with("expected") || message.starts_with("unexpected") ||
               message.starts_with("Expected an expression") ||
               message.starts_with("Unexpected end of template") ||
               message.starts_with("Encountered unknown tag") ||
               message.find("syntax") != std::string::npos) {
      kind = "Jinja syntax error: ";
    }
    std::string out = kind + message;
    if (line <= 0) return out;
    std::vector<std::string> lines;
    {
      std::istringstream in(source);
      for (std::string l; std::getline(in, l);) {
        if (!l.empty() && l.back() == '\r') l.pop_back();
        lines.push_back(l);
      }
    }
    out += "; line " + std::to_string(line) + "\n\n";
    int n = static_cast<int>(lines.size());
    if (line > n) return out + source;
    int start = std::max(0, line - 5 - 1);
    int end = std::min(n, line + 5);
    int err = line - start - 1;
    std::vector<std::string> buf;
    if (start > 0) {
      buf.push_back("[...]");
      ++err;
    }
    for (int i = start; i < end; ++i) buf.push_back(lines[static_cast<size_t>(i)]);
    if (end < n) buf.push_back("[...]");
    buf[static_cast<size_t>(err)] += "    <======================";
    return out + "---\n" + join(buf, "\n") + "\n---";
  }

  // ---- top files ----

  json render_top(const std::string& path, const std::string& env) {
    return compile_template(path, env, "", o.renderer);
  }

  // Salt's get_tops: env -> list of rendered top data. Throws
  // render_failure (get_top then has no top at all).
  std::vector<std::pair<std::string, std::vector<json>>> get_tops() {
    std::vector<std::pair<std::string, std::vector<json>>> tops;
    auto slot = [&](const std::string& env) -> std::vector<json>& {
      for (auto& [e, l] : tops) {
        if (e == env) return l;
      }
      tops.emplace_back(env, std::vector<json>{});
      return tops.back().second;
    };
    if (o.saltenv) {
      auto p = find_file(o.state_top, *o.saltenv);
      slot(*o.saltenv).push_back(p ? render_top(*p, *o.saltenv) : json::object());
    } else {
      std::vector<std::string> list =
          o.state_top_saltenv ? std::vector<std::string>{*o.state_top_saltenv} : envs();
      for (const auto& env : list) {
        auto p = find_file(o.state_top, env);
        slot(env).push_back(p ? render_top(*p, env) : json::object());
      }
    }
    // Top-file includes.
    std::vector<std::pair<std::string, std::vector<std::string>>> include;
    for (auto& [env, ctops] : tops) {
      for (auto& ctop : ctops) {
        if (!ctop.is_object() || !ctop.contains("include")) continue;
        std::vector<std::string> inc;
        if (ctop["include"].is_array()) {
          for (const auto& s : ctop["include"]) inc.push_back(py_str(s));
        }
        ctop.erase("include");
        include.emplace_back(env, std::move(inc));
      }
    }
    std::map<std::string, std::vector<std::string>> done;
    for (const auto& [env, states] : include) {
      for (const auto& sls_match : states) {
        for (const auto& sls : fnmatch_filter(list_states(env), sls_match)) {
          if (contains(done[env], sls)) continue;
          auto st = get_state(sls, env);
          slot(env).push_back(st ? render_top(st->second, env) : json::object());
          done[env].push_back(sls);
        }
      }
    }
    return tops;
  }

  static void put_targets(json& top, const std::string& env, const json& targets) {
    if (!targets.is_object()) {
      if (targets.is_array() || targets.is_string()) {
        // Salt iterates and fails on indexing: no targets.
        throw render_failure("Unable to render top file. No targets found.");
      }
      throw render_failure("Unable to render top file. No targets found.");
    }
    for (const auto& [tgt, v] : targets.items()) {
      if (!top.contains(env)) top[env] = json::object();
      top[env][tgt] = v;
    }
  }

  json merge_tops(std::vector<std::pair<std::string, std::vector<json>>> tops) {
    json top = json::object();
    const std::string& strategy = o.top_file_merging_strategy;
    if (strategy == "same") {
      for (const auto& [cenv, ctops] : tops) {
        bool all_empty = std::all_of(ctops.begin(), ctops.end(),
                                     [](const json& t) { return t.is_object() && t.empty(); });
        if (all_empty) {
          if (!o.default_top) continue;
          const std::vector<json>* fallback = nullptr;
          for (const auto& [e, l] : tops) {
            if (e == *o.default_top) fallback = &l;
          }
          if (!fallback) continue;
          for (const auto& ctop : *fallback) {
            if (!ctop.is_object()) continue;
            for (const auto& [env, targets] : ctop.items()) {
              if (env != cenv) continue;
              put_targets(top, env, targets);
              break;
            }
          }
          continue;
        }
        for (const auto& ctop : ctops) {
          if (!ctop.is_object()) continue;
          for (const auto& [env, targets] : ctop.items()) {
            if (env == "include" || env != cenv) continue;
            put_targets(top, env, targets);
          }
        }
      }
      return top;
    }
    if (strategy == "merge_all") {
      auto read_tgt = [](const json& tgt, json& match_type, std::vector<json>& states) {
        if (!tgt.is_array()) return;
        for (const auto& item : tgt) {
          if (item.is_object()) match_type = item;
          if (item.is_string()) states.push_back(item);
        }
      };
      for (const auto& [e, ctops] : tops) {
        for (const auto& ctop : ctops) {
          if (!ctop.is_object()) continue;
          for (const auto& [env, targets] : ctop.items()) {
            if (env == "include") continue;
            if (!targets.is_object()) throw render_failure("Unable to render top file. No targets found.");
            for (const auto& [tgt, v] : targets.items()) {
              if (!top.contains(env) || !top[env].contains(tgt)) {
                if (!top.contains(env)) top[env] = json::object();
                top[env][tgt] = v;
                continue;
              }
              json t1, t2;
              std::vector<json> s1, s2;
              read_tgt(top[env][tgt], t1, s1);
              read_tgt(v, t2, s2);
              json merged = json::array();
              json mt = !t2.is_null() ? t2 : t1;
              if (!mt.is_null()) merged.push_back(mt);
              for (auto& s : s1) merged.push_back(s);
              for (auto& s : s2) {
                bool have = false;
                for (const auto& m : merged) have = have || py_equal(m, s);
                if (!have) merged.push_back(s);
              }
              top[env][tgt] = merged;
            }
          }
        }
      }
      return top;
    }
    // merge (also Salt's fallback for an unknown strategy).
    for (auto it = tops.begin(); it != tops.end(); ++it) {
      if (it->first != "base") continue;
      for (const auto& ctop : it->second) {
        if (!ctop.is_object()) continue;
        for (const auto& [env, targets] : ctop.items()) {
          if (env == "include") continue;
          put_targets(top, env, targets);
        }
      }
    }
    for (const auto& [cenv, ctops] : tops) {
      if (cenv == "base") continue;
      for (const auto& ctop : ctops) {
        if (!ctop.is_object()) continue;
        for (const auto& [env, targets] : ctop.items()) {
          if (env == "include" || env != cenv || top.contains(env)) continue;
          put_targets(top, env, targets);
        }
      }
    }
    return top;
  }

  // Salt's get_top: the merged top, or {} when a top file failed.
  json get_top() {
    try {
      return merge_tops(get_tops());
    } catch (const render_failure&) {
      return json::object();
    }
  }

  static errors verify_tops(const json& tops) {
    errors errs;
    if (!tops.is_object()) {
      errs.push_back("Top data was not formed as a dict");
      return errs;
    }
    for (const auto& [env, matches] : tops.items()) {
      if (env == "include") continue;
      if (env.empty()) errs.push_back("Empty saltenv statement in top file");
      if (!matches.is_object()) {
        errs.push_back("The top file matches for saltenv " + env +
                       " are not formatted as a dict");
        continue;
      }
      for (const auto& [match, slsmods] : matches.items()) {
        if (!slsmods.is_array()) {
          std::string tname = slsmods.is_string() ? "str"
                              : slsmods.is_null() ? "NoneType"
                              : slsmods.is_boolean() ? "bool"
                              : slsmods.is_number_float() ? "float"
                              : slsmods.is_number() ? "int"
                                                    : "dict";
          errs.push_back("Malformed topfile: state declarations for matcher " +
                         base_repr(match) + " in saltenv " + base_repr(env) +
                         " are not formed as a list (got " + tname + ")");
          continue;
        }
        for (const auto& slsmod : slsmods) {
          if (slsmod.is_object()) {
            for (const auto& [k, val] : slsmod.items()) {
              if (!base::python_truth(val)) {
                errs.push_back("Improperly formatted top file matcher in saltenv " +
                               py_str(slsmod) + ": " + py_str(val) + " file");
              }
            }
          } else if (slsmod.is_string() && slsmod.get_ref<const std::string&>().empty()) {
            errs.push_back("Environment " + env + " contains an empty sls index");
          }
        }
      }
    }
    return errs;
  }

  static std::string base_repr(const std::string& s) { return base::python_repr(s); }

  // The minion's grains and pillar as the target matcher takes them, made
  // once per compile and only for a match that reads them ('*' does not).
  std::optional<nlohmann::json> match_grains, match_pillar;

  bool confirm_top(const std::string& match, const json& data) {
    std::string matcher = "compound";
    for (const auto& item : data) {
      if (item.is_object() && item.contains("match")) matcher = py_str(item["match"]);
    }
    auto t = target::parse_type(matcher);
    if (!t) return false;
    try {
      auto e = target::expression::parse(match, *t, o.nodegroups);
      target::expression::tree_data d;
      if (e.uses_grains()) {
        if (!match_grains) match_grains = nlohmann::json(m.grains);
        d.grains = &*match_grains;
      }
      if (e.uses_pillar()) {
        if (!match_pillar) match_pillar = nlohmann::json(m.pillar);
        d.pillar = &*match_pillar;
      }
      return e.matches(m.id, d, false);
    } catch (const std::exception&) {
      return false;
    }
  }

  json top_matches(const json& top) {
    json matches = json::object();
    if (!top.is_object()) return matches;
    for (const auto& [saltenv, body] : top.items()) {
      if (o.saltenv && saltenv != *o.saltenv) continue;
      if (!body.is_object()) continue;
      for (const auto& [match, data] : body.items()) filter_matches(saltenv, match, data, matches);
    }
    // Salt's master_tops: for each of their saltenvs, the top file's names
    // then the tops' others (master_tops_first: the other way round); the
    // saltenv filter does not apply to them, as in Salt.
    if (m.master_tops.is_object()) {
      for (const auto& [saltenv, ext] : m.master_tops.items()) {
        if (!ext.is_array()) continue;
        json mine = matches.contains(saltenv) ? matches[saltenv] : json::array();
        const json& first = o.master_tops_first ? ext : mine;
        const json& second = o.master_tops_first ? mine : ext;
        json merged = first;
        for (const auto& x : second) {
          if (std::find(first.begin(), first.end(), x) == first.end()) merged.push_back(x);
        }
        matches[saltenv] = std::move(merged);
      }
    }
    return matches;
  }

  void filter_matches(const std::string& saltenv, const std::string& match, json data,
                      json& matches) {
    if (data.is_string()) data = json::array({data});
    if (!data.is_array()) return;
    if (!confirm_top(match, data)) return;
    if (!matches.contains(saltenv)) matches[saltenv] = json::array();
    for (auto& item : data) {
      if (item.is_object() && item.contains("subfilter")) {
        json sub = item["subfilter"];
        item.erase("subfilter");
        if (sub.is_object()) {
          for (const auto& [m2, d2] : sub.items()) filter_matches(saltenv, m2, d2, matches);
        }
      }
      if (item.is_string()) {
        matches[saltenv].push_back(item);
      } else if (item.is_object() && !item.empty()) {
        auto last = std::prev(item.end());
        std::string env_key = last.key();
        json inc = last.value();
        if (!env_available(env_key)) continue;
        if (!matches.contains(env_key)) matches[env_key] = json::array();
        matches[env_key].push_back(inc);
      }
    }
  }

  // ---- SLS ----

  std::pair<json, errors> render_state(const std::string& sls, const std::string& saltenv,
                                       std::set<std::string>& mods, const json& matches) {
    errors errs;
    auto st = get_state(sls, saltenv);
    json state;
    if (!st) {
      errs.push_back("Specified SLS " + sls + " in saltenv " + saltenv +
                     " is not available on the salt master or through a configured fileserver");
    } else {
      try {
        state = compile_template(st->second, saltenv, sls, o.renderer);
      } catch (const render_failure& e) {
        errs.push_back("Rendering SLS '" + saltenv + ":" + sls + "' failed: " + e.what());
      }
      mods.insert(saltenv + ":" + sls);
    }
    if (!base::python_truth(state)) return {json::object(), errs};
    if (!state.is_object()) {
      errs.push_back("SLS " + sls + " does not render to a dictionary");
      return {state, errs};
    }
    json include = json::array();
    if (state.contains("include")) {
      if (!state["include"].is_array()) {
        errs.push_back("Include Declaration in SLS " + sls + " is not formed as a list");
      } else {
        include = std::move(state["include"]);
        state.erase("include");
      }
    }
    handle_extend(state, sls, saltenv, errs);
    handle_exclude(state, sls, saltenv, errs);
    handle_state_decls(state, sls, saltenv, errs);

    for (auto inc : include) {
      std::string env_key = saltenv;
      std::string inc_sls;
      if (inc.is_object()) {
        if (inc.empty()) continue;
        auto last = std::prev(inc.end());
        env_key = last.key();
        inc_sls = py_str(last.value());
      } else {
        inc_sls = py_str(inc);
      }
      if (!env_available(env_key)) {
        errs.push_back("Nonexistent saltenv '" + env_key + "' found in include of '" + inc_sls +
                       "' within SLS '" + saltenv + ":" + sls + "'");
        continue;
      }
      if (inc_sls.starts_with(".")) {
        size_t levels = inc_sls.find_first_not_of('.');
        if (levels == std::string::npos) levels = inc_sls.size();
        std::string rest = inc_sls.substr(levels);
        auto p_comps = split(sls, '.');
        if (st && st->first.ends_with("/init.sls")) p_comps.push_back("init");
        if (levels > p_comps.size()) {
          errs.push_back("Attempted relative include of '" + inc_sls + "' within SLS '" +
                         saltenv + ":" + sls + "' goes beyond top level package ");
          continue;
        }
        p_comps.resize(p_comps.size() - levels);
        p_comps.push_back(rest);
        inc_sls = join(p_comps, ".");
      }
      std::vector<std::string> resolved;
      if (env_key != "_xenv") {
        if (matches.contains(env_key) || !fnmatch_filter(list_states(env_key), inc_sls).empty()) {
          resolved.push_back(env_key);
        }
      } else {
        for (const auto& [aenv, v] : matches.items()) {
          if (!fnmatch_filter(list_states(aenv), inc_sls).empty()) resolved.push_back(aenv);
        }
      }
      if (resolved.size() == 1 || contains(resolved, saltenv)) {
        auto targets = fnmatch_filter(list_states(saltenv), inc_sls);
        if (targets.empty()) targets.push_back(inc_sls);
        for (const auto& t : targets) {
          std::string r_env = resolved.size() == 1 ? resolved[0] : saltenv;
          if (mods.contains(r_env + ":" + t)) continue;
          auto [nstate, nerr] = render_state(t, r_env, mods, matches);
          if (base::python_truth(nstate) && nstate.is_object()) {
            merge_included_states(state, nstate, errs);
          }
          errs.insert(errs.end(), nerr.begin(), nerr.end());
        }
      } else {
        std::string msg;
        if (resolved.empty()) {
          std::string envs_text = env_key;
          if (env_key == "_xenv") {
            std::vector<std::string> ks;
            for (const auto& [k, v] : matches.items()) ks.push_back(k);
            envs_text = join(ks, ", ");
          }
          msg = "Unknown include: Specified SLS " + env_key + ": " + inc_sls +
                " is not available on the salt master in saltenv(s): " + envs_text + " ";
        } else {
          msg = "Ambiguous include: Specified SLS " + env_key + ": " + inc_sls +
                " is available on the salt master in multiple available saltenvs: " +
                join(resolved, ", ");
        }
        errs.push_back(msg);
      }
    }
    if (o.state_auto_order) handle_iorder(state, iorder);
    return {state, errs};
  }

  std::pair<json, errors> render_highstate(const json& matches) {
    json highstate = json::object();
    errors all;
    std::set<std::string> mods;
    std::vector<std::string> statefiles;
    for (const auto& [saltenv, states] : matches.items()) {
      if (!states.is_array()) continue;
      for (const auto& sm : states) {
        std::string sls_match = py_str(sm);
        if (env_available(saltenv)) {
          statefiles = fnmatch_filter(list_states(saltenv), sls_match);
        } else {
          all.push_back("No matching salt environment for environment '" + saltenv + "' found");
        }
        if (statefiles.empty()) statefiles = {sls_match};
        for (const auto& sls : statefiles) {
          if (mods.contains(saltenv + ":" + sls)) continue;
          auto [state, errs] = render_state(sls, saltenv, mods, matches);
          if (base::python_truth(state) && state.is_object()) merge_included_states(highstate, state, errs);
          for (auto& e : errs) {
            if (e.find("is not available") != std::string::npos &&
                e.find("SLS " + sls_match + " in saltenv") != std::string::npos) {
              e = "No matching sls found for '" + sls_match + "' in env '" + saltenv + "'";
            }
          }
          all.insert(all.end(), errs.begin(), errs.end());
        }
      }
    }
    clean_duplicate_extends(highstate);
    return {highstate, all};
  }

  std::optional<result> pillar_errors() const {
    auto it = m.pillar.find("_errors");
    if (it == m.pillar.end()) return std::nullopt;
    json list = json::array({"Pillar failed to render with the following messages:"});
    if (it->is_array()) {
      for (const auto& e : *it) list.push_back(e);
    }
    return result{list, 5};
  }

  json sls_matches(const std::string& mods, const std::optional<std::string>& saltenv) {
    std::string env = saltenv ? *saltenv : o.saltenv ? *o.saltenv : "base";
    json list = json::array();
    for (const auto& part : split(mods, ',')) {
      std::string s = strip(part);
      if (!s.empty()) list.push_back(s);
    }
    json matches = json::object();
    matches[env] = list;
    return matches;
  }
};

compiler::compiler(options o, minion m)
    : p_(std::make_unique<impl>(std::move(o), std::move(m))) {}

void compiler::set_salt(render::value salt) { p_->salt = std::move(salt); }
const render::value& compiler::grains() const { return p_->grains_v; }
const render::value& compiler::pillar() const { return p_->pillar_v; }
const render::value& compiler::opts() const { return p_->opts_v; }
const options& compiler::settings() const { return p_->o; }

compiler::~compiler() = default;

result compiler::show_top() {
  if (auto e = p_->pillar_errors()) return *e;
  p_->iorder = 10000;
  json top = p_->get_top();
  auto errs = impl::verify_tops(top);
  if (!errs.empty()) return {json(errs), 1};
  return {p_->top_matches(top), 0};
}

result compiler::show_highstate() {
  if (auto e = p_->pillar_errors()) return *e;
  p_->iorder = 10000;
  json top = p_->get_top();
  auto errs = impl::verify_tops(top);
  json matches = p_->top_matches(top);
  auto [high, rerrs] = p_->render_highstate(matches);
  errs.insert(errs.end(), rerrs.begin(), rerrs.end());
  if (!errs.empty()) return {json(errs), 1};
  // Salt's _set_retcode: check_result on the high data fails for an empty
  // one and for any top-level value but __extend__ that is not a dict
  // (__exclude__); salt-call then exits 1.
  bool ok = !high.empty();
  for (const auto& [id, body] : high.items()) {
    if (id == "__extend__" ? !body.is_array() : !body.is_object()) ok = false;
    if (body.is_object()) {
      if (auto r = body.find("result"); r != body.end() && *r == false) ok = false;
    }
  }
  return {high, ok ? 0 : 1};
}

result compiler::show_lowstate() {
  if (auto e = p_->pillar_errors()) return *e;
  p_->iorder = 10000;
  json top = p_->get_top();
  json matches = p_->top_matches(top);
  auto [high, errs] = p_->render_highstate(matches);
  auto ext = reconcile_extend(high);
  errs.insert(errs.end(), ext.begin(), ext.end());
  auto v = verify_high(high);
  errs.insert(errs.end(), v.begin(), v.end());
  auto q = requisite_in(high, p_->o.disabled_requisites);
  errs.insert(errs.end(), q.begin(), q.end());
  apply_exclude(high);
  // salt-call exits 0 here: state.show_lowstate sets no retcode.
  if (!errs.empty()) return {json(errs), 0};
  return {compile_high_data(high), 0};
}

compiler::run_plan compiler::plan(const std::optional<std::string>& mods,
                                  const std::optional<std::string>& saltenv, const json& exclude) {
  run_plan out;
  if (auto e = p_->pillar_errors()) {
    out.errors = e->ret;
    return out;
  }
  p_->iorder = 10000;
  json matches;
  errors errs;
  if (mods) {
    matches = p_->sls_matches(*mods, saltenv);
  } else {
    json top = p_->get_top();
    errs = impl::verify_tops(top);
    matches = p_->top_matches(top);
    bool any = false;
    for (const auto& [env, list] : matches.items()) any = any || !list.empty();
    if (errs.empty() && !any) {
      out.no_top = true;
      return out;
    }
  }
  auto [high, rerrs] = p_->render_highstate(matches);
  errs.insert(errs.end(), rerrs.begin(), rerrs.end());
  if (!errs.empty()) {
    out.errors = json(errs);
    return out;
  }
  // Salt's state.sls and call_highstate: exclude= extends __exclude__.
  json ex = exclude;
  if (ex.is_string()) {
    json list = json::array();
    for (const auto& part : split(ex.get<std::string>(), ',')) list.push_back(part);
    ex = list;
  }
  if (ex.is_array() && !ex.empty()) {
    if (!high.contains("__exclude__")) high["__exclude__"] = json::array();
    for (const auto& e : ex) high["__exclude__"].push_back(e);
  }
  auto low = compile_low(std::move(high), p_->o.disabled_requisites);
  if (!low.errs.empty()) {
    out.errors = json(low.errs);
    return out;
  }
  out.chunks = std::move(low.chunks);
  return out;
}

result compiler::show_sls(const std::string& mods, const std::optional<std::string>& saltenv) {
  if (auto e = p_->pillar_errors()) return *e;
  p_->iorder = 10000;
  auto [high, errs] = p_->render_highstate(p_->sls_matches(mods, saltenv));
  auto v = verify_high(high);
  errs.insert(errs.end(), v.begin(), v.end());
  if (!errs.empty()) return {json(errs), 1};
  return {high, 0};
}

result compiler::show_low_sls(const std::string& mods,
                              const std::optional<std::string>& saltenv) {
  if (auto e = p_->pillar_errors()) return *e;
  p_->iorder = 10000;
  auto [high, errs] = p_->render_highstate(p_->sls_matches(mods, saltenv));
  auto v = verify_high(high);
  errs.insert(errs.end(), v.begin(), v.end());
  if (!errs.empty()) return {json(errs), 1};
  return {compile_high_data(high), 0};
}

result compiler::renderer(const std::string& path, const std::string& default_renderer,
                          const json& kwargs) {
  std::string saltenv = "base";
  std::string sls;
  json ctx = json::object();
  if (kwargs.is_object()) {
    for (const auto& [k, v] : kwargs.items()) {
      if (k == "saltenv") {
        saltenv = py_str(v);
      } else if (k == "sls") {
        sls = py_str(v);
      } else if (!k.starts_with("__")) {
        ctx[k] = v;
      }
    }
  }
  std::optional<std::string> file;
  if (path.starts_with("salt://")) {
    file = p_->find_file(path, saltenv);
  } else {
    std::error_code ec;
    if (fs::is_regular_file(path, ec)) file = path;
  }
  if (!file) return {json::object(), 0};
  try {
    return {p_->compile_template(*file, saltenv, sls, default_renderer, ctx), 0};
  } catch (const render_failure& e) {
    return {json("ERROR: Rendering " + path + " failed: " + e.what()), 1};
  }
}

std::string compiler::render_file(const std::string& path, const std::string& saltenv,
                                  const std::string& sls, const json& context) {
  auto text = read_text(path);
  if (!text) throw render_failure("cannot read " + path);
  return p_->render_jinja(*text, path, saltenv, sls, context.is_object() ? context : json::object());
}

std::vector<std::string> compiler::list_states(const std::string& saltenv) const {
  return p_->list_states(saltenv);
}

std::vector<std::string> compiler::list_files(const std::string& saltenv) const {
  return p_->list_files(saltenv);
}

std::optional<std::string> compiler::find_file(const std::string& rel,
                                               const std::string& saltenv) const {
  return p_->find_file(rel, saltenv);
}

void forget_compile_caches() {
  sls_yaml_cache().clear();
  render::forget_parsed_templates();
}

}  // namespace brine::state
