#include <gtest/gtest.h>

#include <map>
#include <string>

#include "render/interpreter.h"
#include "render/render.h"

// The parse cache that all renders share (detail::shared_template): a tree
// is reused only for the same name, options and source, and a template
// rendered from a shared tree still sees its own render's context.
namespace brine::render {
namespace {

using files = std::map<std::string, std::string>;

environment env_with(const files* fs) {
  environment env;
  env.loader = [fs](const std::string& name, const std::string&) -> std::optional<std::string> {
    auto it = fs->find(name);
    if (it == fs->end()) return std::nullopt;
    return it->second;
  };
  return env;
}

TEST(SharedTemplate, OneTreePerNameOptionsAndSource) {
  detail::parse_options o;
  auto a = detail::shared_template("{{ x }} cache-test-1", "a.sls", o);
  EXPECT_EQ(a, detail::shared_template("{{ x }} cache-test-1", "a.sls", o));
  EXPECT_NE(a, detail::shared_template("{{ x }} cache-test-2", "a.sls", o));
  auto b = detail::shared_template("{{ x }} cache-test-1", "b.sls", o);
  EXPECT_NE(a, b);
  EXPECT_EQ(b->name, "b.sls");
  detail::parse_options trim;
  trim.trim_blocks = true;
  EXPECT_NE(a, detail::shared_template("{{ x }} cache-test-1", "a.sls", trim));
}

TEST(SharedTemplate, AParseErrorIsNotCached) {
  detail::parse_options o;
  EXPECT_THROW(detail::shared_template("{% if %}", "bad.sls", o), template_error);
  EXPECT_THROW(detail::shared_template("{% if %}", "bad.sls", o), template_error);
}

TEST(SharedTemplate, AnImportedTemplateSeesEachRendersContext) {
  files fs = {{"lib.jinja", "{% macro who() %}{{ name }}{% endmacro %}{% set here = name %}"},
              {"part.jinja", "[{{ name }}]"}};
  const std::string main =
      "{% from 'lib.jinja' import who, here with context %}"
      "{% include 'part.jinja' %}{{ who() }}/{{ here }}";
  environment env = env_with(&fs);
  EXPECT_EQ(render(main, "main", {{"name", value("one")}}, env), "[one]one/one");
  EXPECT_EQ(render(main, "main", {{"name", value("two")}}, env), "[two]two/two");
}

TEST(SharedTemplate, AnEditedTemplateIsParsedAgain) {
  files fs = {{"map.jinja", "{% set v = 1 %}"}};
  const std::string main = "{% from 'map.jinja' import v %}{{ v }}";
  environment env = env_with(&fs);
  EXPECT_EQ(render(main, "main", {}, env), "1");
  fs["map.jinja"] = "{% set v = 2 %}";
  EXPECT_EQ(render(main, "main", {}, env), "2");
}

TEST(SharedTemplate, ErrorsNameTheTemplateThatFailed) {
  const std::string source = "line one\n{{ missing }}";
  try {
    render(source, "first.sls", {});
    ADD_FAILURE() << "rendered";
  } catch (const template_error& e) {
    EXPECT_NE(std::string(e.what()).find("template 'first.sls' line 2"), std::string::npos)
        << e.what();
  }
  try {
    render(source, "second.sls", {});
    ADD_FAILURE() << "rendered";
  } catch (const template_error& e) {
    EXPECT_NE(std::string(e.what()).find("template 'second.sls' line 2"), std::string::npos)
        << e.what();
  }
}

TEST(SharedTemplate, SaltsGlobalsAreEachRenders) {
  // One file, one tree, imported by the sls of two renders: each sees its
  // own render's sls and the tpldir of its own path.
  files fs = {{"common/x.jinja", "{{ tpldir }} {{ tplfile }} {{ sls }}"}};
  environment env = env_with(&fs);
  env.globals["tpldir"] = value("a");
  env.globals["sls"] = value("a");
  EXPECT_EQ(render("{% include 'common/x.jinja' %}", "a/init.sls", {}, env),
            "common common/x.jinja a");
  env.globals["tpldir"] = value("b");
  env.globals["sls"] = value("b.c");
  EXPECT_EQ(render("{% include 'common/x.jinja' %}", "b/c.sls", {}, env),
            "common common/x.jinja b.c");
}

}  // namespace
}  // namespace brine::render
