#include "state/bridge.h"

#include <gtest/gtest.h>

#include "modules/registry.h"
#include "render/render.h"
#include "state/highstate.h"

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

}  // namespace
}  // namespace brine::state
