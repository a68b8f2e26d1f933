#include "render/render.h"

#include "render/interpreter.h"

namespace brine::render {

environment environment::salt() {
  environment env;
  env.salt_trailing_newline = true;
  return env;
}

std::string render(const std::string& source, const std::string& name, const context& ctx,
                   const environment& env) {
  detail::parse_options opts;
  opts.trim_blocks = env.trim_blocks;
  opts.lstrip_blocks = env.lstrip_blocks;
  opts.keep_trailing_newline = env.keep_trailing_newline;
  auto tree = detail::parse_template(source, name, opts);
  detail::render_state state{env, opts, {}, {}, {}, {}, {}, 0, 0};
  detail::interpreter in(ctx, env, name, &state);
  // Salt's tpldir global, else the template's own directory, is where its
  // relative names ('./x', '../x') start.
  std::string tpldir = ".";
  if (auto g = env.globals.find("tpldir"); g != env.globals.end() && g->second.is_string()) {
    tpldir = g->second.as_string();
  } else if (auto slash = name.rfind('/'); slash != std::string::npos && slash > 0) {
    tpldir = name.substr(0, slash);
  }
  std::string out;
  try {
    in.run(*tree, tpldir, out);
  } catch (const detail::located_error& e) {
    throw template_error(e.what());
  } catch (const template_error& e) {
    throw template_error("template '" + name + "': " + e.what());
  }
  if (env.salt_trailing_newline && !env.keep_trailing_newline) {
    if (source.ends_with("\n")) out += "\n";
  }
  return out;
}

std::string render_json(const std::string& source, const std::string& name,
                        const nlohmann::ordered_json& ctx, const environment& env) {
  if (!ctx.is_object() && !ctx.is_null())
    throw template_error("template '" + name + "': the context must be a JSON object");
  context c;
  if (ctx.is_object())
    for (const auto& [k, v] : ctx.items()) c[k] = value::from_json(v);
  return render(source, name, c, env);
}

}  // namespace brine::render
