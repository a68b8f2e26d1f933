#include "state/bridge.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "modules/registry.h"
#include "render/render.h"
#include "state/highstate.h"
#include "support/temp_dir.h"

namespace brine::state {
namespace {

// salt.mod.fun reaches the function even when its name is a dict method's
// (get, items, update): Salt's loader namespaces are not dicts.
TEST(Bridge, AttributeSyntaxReachesFunctionsNamedLikeDictMethods) {
  modules::registry reg;
  modules::register_builtin_modules(reg);
  options o;
  o.file_roots = {{"base", {"/nonexistent"}}};
  minion m;
  m.id = "m1";
  m.pillar = json::parse(R"({"a": {"b": 1}})");
  compiler c(o, m);
  render::value salt = make_salt(c, reg, nullptr);
  render::context ctx{{"salt", salt}};
  EXPECT_EQ(render::render("{{ salt.pillar.get('a:b') }}|{{ salt.config.get('a:b') }}|"
                           "{{ salt['pillar.get']('a:b') }}|{{ salt.config.get('nope') }}.",
                           "t", ctx),
            "1|1|1|.");
}

// config.get merge= as Salt 3006.26's (its output for the same data):
// Salt's defaults, the master's options, pillar, grains and options laid
// over each other; overwrite replaces a top-level key whole.
TEST(Bridge, ConfigGetMergesEverySource) {
  modules::registry reg;
  modules::register_builtin_modules(reg);
  options o;
  o.file_roots = {{"base", {"/nonexistent"}}};
  minion m;
  m.id = "m1";
  m.opts = json::parse(R"({"id": "m1", "conf": {"x": 1, "y": {"o": 1}}})");
  m.grains = json::parse(R"({"conf": {"y": {"g": 2}}})");
  m.pillar = json::parse(R"({"conf": {"z": 3, "y": {"p": 1}}, "master": {"conf": {"w": 0}}})");
  compiler c(o, m);
  render::context ctx{{"salt", make_salt(c, reg, nullptr)}};
  EXPECT_EQ(render::render("{{ salt['config.get']('conf', merge='recurse') }}", "t", ctx),
            "{'w': 0, 'z': 3, 'y': {'p': 1, 'g': 2, 'o': 1}, 'x': 1}");
  EXPECT_EQ(render::render("{{ salt['config.get']('conf', merge='overwrite') }}", "t", ctx),
            "{'x': 1, 'y': {'o': 1}}");
  EXPECT_EQ(render::render("{{ salt['config.get']('mongo.port', merge='recurse') }}", "t", ctx),
            "27017");
  EXPECT_THROW(render::render("{{ salt['pillar.get']('conf', pillarenv='dev') }}", "t", ctx),
               render::template_error);
}

// defaults.get reads salt://NS/defaults.yaml of base (Salt's defaults module).
TEST(Bridge, DefaultsGetReadsTheFormulasDefaultsFile) {
  test::temp_dir dir{"brine-bridge"};
  std::filesystem::create_directories(dir.file("web"));
  std::ofstream(dir.file("web/defaults.yaml")) << "web:\n  port: 80\n  users: [a]\n";
  modules::registry reg;
  options o;
  o.file_roots = {{"base", {dir.file("")}}};
  minion m;
  m.id = "m1";
  compiler c(o, m);
  render::context ctx{{"salt", make_salt(c, reg, nullptr)}};
  EXPECT_EQ(render::render("{{ salt['defaults.get']('web:web:port') }}|"
                           "{{ salt['defaults.get']('web:web:nope', default=7) }}|"
                           "{{ salt['defaults.get']('web') }}|{{ salt['defaults.get']('none') }}",
                           "t", ctx),
            "80|7|{'web': {'port': 80, 'users': ['a']}}|None");
}

}  // namespace
}  // namespace brine::state
