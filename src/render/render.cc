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
  detail::body tree = detail::parse(source, name, opts);
  detail::interpreter in(ctx, env, name);
  std::string out;
  try {
    in.run(tree, out);
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
