// libFuzzer target: template source through the Jinja lexer, parser and
// interpreter. The input is split at NUL bytes: the first piece is rendered,
// the others are templates t1, t2, ... that include/import/extends/
// import_yaml can load. Every input must render or fail with template_error:
// any other exception, a crash, a sanitizer report or a hang is a bug. The
// step budget bounds the work one render may do.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "render/render.h"
#include "render/salt_filters.h"

namespace {

brine::render::context make_context() {
  using brine::render::value;
  brine::render::context ctx;
  ctx["l"] = value::make_list({value(1), value(2), value("three")});
  value d = value::make_dict();
  d.dict().set(value("a"), value(1));
  d.dict().set(value("b"), value::make_list({value(2.5), value(nullptr)}));
  ctx["d"] = d;
  ctx["s"] = value("str");
  ctx["n"] = value(3);
  return ctx;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> pieces;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= input.size(); ++i) {
    if (i == input.size() || input[i] == '\0') {
      pieces.push_back(input.substr(start, i - start));
      start = i + 1;
    }
  }
  brine::render::environment env = brine::render::environment::salt();
  env.max_steps = 20000;
  env.trim_blocks = size > 0 && (data[size - 1] & 1);
  env.lstrip_blocks = size > 0 && (data[size - 1] & 2);
  env.loader = [&pieces](const std::string& name,
                         const std::string&) -> std::optional<std::string> {
    if (name.size() < 2 || name[0] != 't') return std::nullopt;
    std::size_t k = 0;
    for (std::size_t i = 1; i < name.size(); ++i) {
      if (name[i] < '0' || name[i] > '9' || k > 100) return std::nullopt;
      k = k * 10 + static_cast<std::size_t>(name[i] - '0');
    }
    if (k == 0 || k >= pieces.size()) return std::nullopt;
    return pieces[k];
  };
  // Salt's filters and Salt's YAML loader (render/yaml.cc), which
  // import_yaml, load_yaml and the load_yaml filter reach.
  brine::render::use_salt_dialect(env);
  env.globals["g"] = brine::render::value("global");
  env.globals["tpldir"] = brine::render::value(".");
  brine::render::context ctx = make_context();
  try {
    brine::render::render(pieces[0], "fuzz.sls", ctx, env);
  } catch (const brine::render::template_error&) {
  }
  return 0;
}
