#include "pillar/render.h"

#include <sys/stat.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "base/fs.h"
#include "render/pgp.h"
#include "render/render.h"
#include "render/salt_filters.h"
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
// arguments; otherwise the master's `renderer`, jinja|yaml. Throws for
// pipes brine cannot run.
struct pipe_plan {
  bool jinja = true;  // the text goes through Jinja first
  bool gpg = false;   // the data through the gpg renderer last
};

pipe_plan parse_pipe(std::string_view text, const std::string& path) {
  std::string_view first = text.substr(0, text.find('\n'));
  if (!first.starts_with("#!") || first.starts_with("#!/")) return {};
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
  for (std::string_view name : names) {
    if (std::string refusal = render::python_renderer_refusal(name, path); !refusal.empty()) {
      throw render_error("pillar file " + path + " line 1: " + refusal);
    }
  }
  pipe_plan plan;
  if (names.size() > 1 && names.back() == "gpg") {
    plan.gpg = true;
    names.pop_back();
  }
  using v = std::vector<std::string_view>;
  if (names == v{"yaml"}) {
    plan.jinja = false;
    return plan;
  }
  if (names == v{"jinja", "yaml"} || names == v{"yaml", "jinja"}) return plan;
  throw render_error("pillar file " + path + " line 1: renderer '#!" + std::string(pipe) +
                     "' is not supported; brine renders pillar files as #!yaml or "
                     "#!jinja|yaml (the default), either followed by |gpg");
}

bool has_markup(std::string_view text) {
  for (std::string_view markup : {"{{", "{%", "{#"}) {
    if (text.find(markup) != std::string_view::npos) return true;
  }
  return false;
}

// The file through Jinja with Salt's pillar context.
std::string render_jinja(std::string_view text, const std::string& path,
                         const template_context& ctx) {
  // salt.utils.templates.generate_sls_context, for a file in one of `roots`.
  std::string rel = path;
  for (const auto& root : ctx.roots) {
    std::string prefix = root.ends_with('/') ? root : root + "/";
    if (path.starts_with(prefix)) {
      rel = path.substr(prefix.size());
      break;
    }
  }
  std::string slspath = ctx.sls;
  std::replace(slspath.begin(), slspath.end(), '.', '/');
  std::string tplfile = rel;
  if (ctx.sls.empty()) tplfile = rel.substr(rel.rfind('/') + 1);
  std::string dir = tplfile.find('/') == std::string::npos ? "" : tplfile.substr(0, tplfile.rfind('/'));
  auto with = [](std::string s, char c) {
    std::replace(s.begin(), s.end(), '/', c);
    return s;
  };
  render::context c;
  c["salt"] = ctx.salt;
  c["grains"] = ctx.grains;
  c["pillar"] = ctx.pillar;
  c["opts"] = ctx.opts;
  c["saltenv"] = render::value(ctx.saltenv);
  c["sls"] = render::value(ctx.sls);
  c["tplpath"] = render::value(path);
  c["tplfile"] = render::value(tplfile);
  c["tpldir"] = render::value(dir.empty() ? std::string(".") : dir);
  c["tpldot"] = render::value(with(dir, '.'));
  c["slspath"] = render::value(dir);
  c["slsdotpath"] = render::value(with(dir, '.'));
  c["slscolonpath"] = render::value(with(dir, ':'));
  c["sls_path"] = render::value(with(dir, '_'));
  render::environment env = render::environment::salt();
  render::use_salt_dialect(env);
  env.globals = c;
  env.loader = [&ctx](const std::string& name, const std::string&) -> std::optional<std::string> {
    std::string rel_name = name.starts_with("salt://") ? name.substr(7) : name;
    if (rel_name.empty() || rel_name.starts_with('/') || rel_name.find("..") != std::string::npos) {
      return std::nullopt;
    }
    for (const auto& root : ctx.roots) {
      std::string full = root + "/" + rel_name;
      struct stat st {};
      if (::stat(full.c_str(), &st) == 0 && S_ISREG(st.st_mode)) return base::read_file(full);
    }
    return std::nullopt;
  };
  try {
    return render::render(std::string(text), rel, c, env);
  } catch (const render::template_error& e) {
    throw render_error("pillar file " + path + ": " + e.what());
  }
}

}  // namespace

bool is_template(std::string_view text) {
  if (!has_markup(text)) return false;
  try {
    return parse_pipe(text, "").jinja;
  } catch (const render_error&) {
    return false;  // refused when it is rendered
  }
}

template <class Json>
Json render_text(std::string_view text, const std::string& path, const template_context* ctx,
                 const render::pgp_decryptor* gpg) {
  const pipe_plan plan = parse_pipe(text, path);
  std::string rendered;
  if (plan.jinja && has_markup(text)) {
    if (ctx == nullptr) {
      throw render_error("pillar file " + path +
                         " is a Jinja template: it renders for a minion, with its grains");
    }
    rendered = render_jinja(text, path, *ctx);
    text = rendered;
  }
  Json data;
  try {
    data = render::load_yaml<Json>(text, path);
  } catch (const render::yaml_error& e) {
    std::string where = "pillar file " + path;
    if (e.line() > 0) {
      where += " line " + std::to_string(e.line()) + " column " + std::to_string(e.column());
    }
    throw render_error(where + ": " + e.message());
  }
  if (plan.gpg) {
    if (gpg == nullptr || !*gpg) {
      throw render_error("pillar file " + path +
                         " line 1: the gpg renderer needs the host's gpg settings, which this "
                         "compile was not given");
    }
    try {
      render::decrypt_pgp(data, *gpg);
    } catch (const base::error& e) {
      throw render_error("pillar file " + path + ": " + e.what());
    }
  }
  return data;
}

template <class Json>
Json render_file(const std::string& path, const template_context* ctx,
                 const render::pgp_decryptor* gpg) {
  std::string text;
  try {
    text = base::read_file(path);
  } catch (const base::error& e) {
    throw render_error("pillar file " + std::string(e.what()));
  }
  return render_text<Json>(text, path, ctx, gpg);
}

template nlohmann::json render_text<nlohmann::json>(std::string_view, const std::string&,
                                                    const template_context*,
                                                    const render::pgp_decryptor*);
template nlohmann::ordered_json render_text<nlohmann::ordered_json>(
    std::string_view, const std::string&, const template_context*, const render::pgp_decryptor*);
template nlohmann::json render_file<nlohmann::json>(const std::string&, const template_context*,
                                                    const render::pgp_decryptor*);
template nlohmann::ordered_json render_file<nlohmann::ordered_json>(
    const std::string&, const template_context*, const render::pgp_decryptor*);

}  // namespace brine::pillar::detail
