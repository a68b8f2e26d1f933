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

// A compiler for minion `m` over one base root, and a template context
// whose `salt` reaches the built-in functions through the bridge.
struct bridged {
  explicit bridged(minion m, const std::string& root = "/nonexistent")
      : c(with_root(root), std::move(m)) {
    modules::register_builtin_modules(reg);
    ctx["salt"] = make_salt(c, reg, nullptr);
  }
  static options with_root(const std::string& root) {
    options o;
    o.file_roots = {{"base", {root}}};
    return o;
  }
  std::string render(const std::string& source) { return render::render(source, "t", ctx); }

  modules::registry reg;
  compiler c;
  render::context ctx;
};

// salt.mod.fun reaches the function even when its name is a dict method's
// (get, items, update): Salt's loader namespaces are not dicts.
TEST(Bridge, AttributeSyntaxReachesFunctionsNamedLikeDictMethods) {
  minion m;
  m.pillar = json::parse(R"({"a": {"b": 1}})");
  bridged b(m);
  EXPECT_EQ(b.render("{{ salt.pillar.get('a:b') }}|{{ salt.config.get('a:b') }}|"
                     "{{ salt['pillar.get']('a:b') }}|{{ salt.config.get('nope') }}."),
            "1|1|1|.");
}

// config.get merge= as Salt 3006.26's (its output for the same data):
// Salt's defaults, the master's options, pillar, grains and options laid
// over each other; overwrite replaces a top-level key whole.
TEST(Bridge, ConfigGetMergesEverySource) {
  minion m;
  m.opts = json::parse(R"({"id": "m1", "conf": {"x": 1, "y": {"o": 1}}})");
  m.grains = json::parse(R"({"conf": {"y": {"g": 2}}})");
  m.pillar = json::parse(R"({"conf": {"z": 3, "y": {"p": 1}}, "master": {"conf": {"w": 0}}})");
  bridged b(m);
  EXPECT_EQ(b.render("{{ salt['config.get']('conf', merge='recurse') }}"),
            "{'w': 0, 'z': 3, 'y': {'p': 1, 'g': 2, 'o': 1}, 'x': 1}");
  EXPECT_EQ(b.render("{{ salt['config.get']('conf', merge='overwrite') }}"),
            "{'x': 1, 'y': {'o': 1}}");
  EXPECT_EQ(b.render("{{ salt['config.get']('mongo.port', merge='recurse') }}"),
            "27017");
  EXPECT_THROW(b.render("{{ salt['pillar.get']('conf', pillarenv='dev') }}"),
               render::template_error);
}

// defaults.get reads salt://NS/defaults.yaml of base (Salt's defaults module).
// config.option, merge and dot_vals in templates, in Salt 3006's key order:
// wildcard matches from the master's options, pillar, grains, then the
// minion's; merge is Salt's tmp.update(ret), which changes the later
// source's dict in place (the pillar shows it afterwards, as in Salt).
// Salt 3006.23 printed the same for the same options, grains and pillar.
TEST(Bridge, ConfigOptionMergeAndDotValsKeepSaltsOrder) {
  minion m;
  m.opts = json::parse(R"({"id": "m1", "svc.b": 2, "svc.a": 1, "lst": [1], "conf": {"x": 1}})");
  m.grains = json::parse(R"({"svc.c": 3})");
  m.pillar = json::parse(
      R"({"svc.z": 0, "conf": {"z": 3, "x": 0}, "lst": [3],
          "master": {"svc.m": 9, "conf": {"w": 0}, "lst": [2]}})");
  bridged b(m);
  EXPECT_EQ(b.render("{{ salt['config.option']('svc.*', wildcard=True) }}"),
            "{'svc.m': 9, 'svc.z': 0, 'svc.c': 3, 'svc.b': 2, 'svc.a': 1}");
  EXPECT_EQ(b.render("{{ salt['config.option']('svc.c') }}|{{ salt.config.option('svc.m') }}|"
                     "{{ salt['config.option']('conf:x') }}|"
                     "{{ salt['config.option']('redis.port') }}"),
            "3|9||6379");
  EXPECT_EQ(b.render("{{ salt['config.dot_vals']('svc') }}"),
            "{'svc.m': 9, 'svc.b': 2, 'svc.a': 1}");
  EXPECT_EQ(b.render("{{ salt['config.merge']('lst') }}"), "[1, 2, 3]");
  EXPECT_EQ(b.render("{{ salt['config.merge']('conf') }}|{{ salt['pillar.get']('conf') }}"),
            "{'z': 3, 'x': 1, 'w': 0}|{'z': 3, 'x': 1, 'w': 0}");
  EXPECT_EQ(b.render("{{ salt['config.get']('mongo.port') }}"), "27017");
}

TEST(Bridge, DefaultsGetReadsTheFormulasDefaultsFile) {
  test::temp_dir dir{"brine-bridge"};
  std::filesystem::create_directories(dir.file("web"));
  std::ofstream(dir.file("web/defaults.yaml")) << "web:\n  port: 80\n  users: [a]\n";
  bridged b(minion{}, dir.file(""));
  EXPECT_EQ(b.render("{{ salt['defaults.get']('web:web:port') }}|"
                     "{{ salt['defaults.get']('web:web:nope', default=7) }}|"
                     "{{ salt['defaults.get']('web') }}|{{ salt['defaults.get']('none') }}"),
            "80|7|{'web': {'port': 80, 'users': ['a']}}|None");
}

}  // namespace
}  // namespace brine::state
