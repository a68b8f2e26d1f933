#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "render/render.h"
#include "render/tests/python_oracle.h"

// include, import, from, extends and block through environment::loader, and
// Salt's tags. Table cases render the template 'main' of a set of templates;
// their expected outputs come from Python's Jinja2 3.1 with a DictLoader.
namespace brine::render {
namespace loader_test {
namespace {

struct loader_case {
  const char* files;  // JSON object: template name -> source
  const char* context;
  const char* expected;  // output, or a part of the error message
  bool error;
};

const loader_case k_cases[] = {
#include "render/tests/loader_cases.inc"
};

using files = std::map<std::string, std::string>;

environment env_with(const files& fs, std::vector<std::string>* asked = nullptr) {
  environment env;
  env.loader = [fs, asked](const std::string& name,
                           const std::string& from) -> std::optional<std::string> {
    if (asked) asked->push_back(name + "<-" + from);
    auto it = fs.find(name);
    if (it == fs.end()) return std::nullopt;
    return it->second;
  };
  return env;
}

std::string run(const loader_case& c) {
  auto j = nlohmann::ordered_json::parse(c.files);
  files fs;
  for (const auto& [k, v] : j.items()) fs[k] = v.get<std::string>();
  return render_json(fs.at("main"), "main", nlohmann::ordered_json::parse(c.context), env_with(fs));
}

class LoaderCases : public ::testing::TestWithParam<loader_case> {};

TEST_P(LoaderCases, RendersAsJinja) {
  const loader_case& c = GetParam();
  if (!c.error) {
    try {
      EXPECT_EQ(run(c), c.expected) << "templates: " << c.files;
    } catch (const template_error& e) {
      ADD_FAILURE() << "templates: " << c.files << "\nerror: " << e.what();
    }
    return;
  }
  try {
    std::string out = run(c);
    ADD_FAILURE() << "templates: " << c.files << "\nexpected an error, got: " << out;
  } catch (const template_error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find(c.expected), std::string::npos)
        << "templates: " << c.files << "\nerror: " << what;
    EXPECT_EQ(what.rfind("template '", 0), 0u) << what;
  }
}

INSTANTIATE_TEST_SUITE_P(Table, LoaderCases, ::testing::ValuesIn(k_cases));

std::string error_of(const std::string& source, const environment& env, const context& ctx = {}) {
  try {
    std::string out = render(source, "init.sls", ctx, env);
    return "no error: " + out;
  } catch (const template_error& e) {
    return e.what();
  }
}

TEST(Loader, ErrorsNameTheTemplateAndTheTagsThatLedThere) {
  auto env = env_with({{"nginx/map.jinja", "{% set x = 1 %}\n\n  {{ x ~ foo }}"},
                       {"nginx/inc.sls", "a\n{% import 'nginx/map.jinja' as m %}"},
                       {"bad.jinja", "{% if %}"}});
  EXPECT_EQ(error_of("{% import 'nginx/map.jinja' as m %}", env),
            "template 'nginx/map.jinja' line 3 column 10: 'foo' is undefined "
            "(imported from 'init.sls' line 1)");
  EXPECT_EQ(error_of("\n\n{% include 'nginx/inc.sls' %}", env),
            "template 'nginx/map.jinja' line 3 column 10: 'foo' is undefined "
            "(imported from 'nginx/inc.sls' line 2, included from 'init.sls' line 3)");
  EXPECT_EQ(error_of("{% include 'bad.jinja' %}", env),
            "template 'bad.jinja' line 1 column 7: Expected an expression, got 'end of statement "
            "block' "
            "(included from 'init.sls' line 1)");
  EXPECT_EQ(error_of("x\n  {% include 'none.jinja' %}", env),
            "template 'init.sls' line 2 column 6: TemplateNotFound: none.jinja");
  // The first line keeps the format of an error in the template itself.
  EXPECT_EQ(error_of("{{ nope }}", env), "template 'init.sls' line 1 column 4: 'nope' is undefined");
}

TEST(Loader, AnErrorInAnImportedMacroNamesTheCall) {
  auto env = env_with({{"macros.jinja", "{% macro f(x) %}\n{{ x.nope }}{% endmacro %}"},
                       {"a.sls", "{% from 'macros.jinja' import f %}\n\n{{ f(1) }}"}});
  EXPECT_EQ(error_of("{% from 'macros.jinja' import f %}{{ f(1) }}", env),
            "template 'macros.jinja' line 2 column 4: 'int object' has no attribute 'nope' "
            "(called from 'init.sls' line 1)");
  EXPECT_EQ(error_of("{% include 'a.sls' %}", env),
            "template 'macros.jinja' line 2 column 4: 'int object' has no attribute 'nope' "
            "(called from 'a.sls' line 3, included from 'init.sls' line 1)");
  // A macro of the same template adds nothing.
  EXPECT_EQ(error_of("{% macro g() %}{{ nope }}{% endmacro %}\n{{ g() }}", env),
            "template 'init.sls' line 1 column 19: 'nope' is undefined");
}

TEST(Loader, ATemplateIncludingItselfIsAnErrorNotACrash) {
  auto env = env_with({{"a", "{% include 'b' %}"}, {"b", "{% include 'a' %}"}});
  std::string e = error_of("{% include 'a' %}", env);
  EXPECT_NE(e.find("a template includes itself ('a' -> 'b' -> 'a'"), std::string::npos) << e;
  auto ext = env_with({{"a", "{% extends 'a' %}"}});
  e = error_of("{% extends 'a' %}", ext);
  EXPECT_NE(e.find("a template includes itself"), std::string::npos) << e;
  // A bounded recursive include is fine, as in Jinja.
  auto rec = env_with({{"r", "{{ n }}{% if n > 0 %}{% with n = n - 1 %}{% include 'r' %}"
                              "{% endwith %}{% endif %}"}});
  EXPECT_EQ(render("{% with n = 3 %}{% include 'r' %}{% endwith %}", "t", {}, rec), "3210");
}

TEST(Loader, EachTemplateIsLoadedOncePerRender) {
  std::vector<std::string> asked;
  auto env = env_with({{"map.jinja", "{% set v = 1 %}"}, {"a", "{% import 'map.jinja' as m %}"}},
                      &asked);
  EXPECT_EQ(render("{% for i in range(3) %}{% include 'a' %}{% endfor %}"
                   "{% from 'map.jinja' import v %}{{ v }}",
                   "top.sls", {}, env),
            "1");
  EXPECT_EQ(asked, (std::vector<std::string>{"a<-top.sls", "map.jinja<-a"}));
}

TEST(Loader, RelativeNamesResolveAgainstTheAskingTemplatesDirectory) {
  std::vector<std::string> asked;
  auto env = env_with({{"nginx/map.jinja", "{% set v = 'map' %}"},
                       {"nginx/files/x.jinja", "X{% include '../map.jinja' ignore missing %}"},
                       {"common.jinja", "C"}},
                      &asked);
  EXPECT_EQ(render("{% from './map.jinja' import v %}{{ v }}"
                   "{% include './files/x.jinja' %}{% include '../common.jinja' %}",
                   "nginx/init.sls", {}, env),
            "mapXC");
  // SaltCacheLoader: a template loaded by a relative name keeps its asker's
  // tpldir, so '../map.jinja' from nginx/files/x.jinja is common's level.
  EXPECT_EQ(asked, (std::vector<std::string>{"nginx/map.jinja<-nginx/init.sls",
                                             "nginx/files/x.jinja<-nginx/init.sls",
                                             "map.jinja<-nginx/files/x.jinja",
                                             "common.jinja<-nginx/init.sls"}));
  // Climbing above the root finds nothing, without asking the loader.
  asked.clear();
  EXPECT_NE(error_of("{% include '../../x' %}", env).find("TemplateNotFound: ../../x"),
            std::string::npos);
  EXPECT_TRUE(asked.empty());
}

TEST(Loader, GlobalsReachImportedTemplatesAndSaltsTpldirFollowsTheTemplate) {
  auto env = env_with({{"nginx/map.jinja", "{% set v = grains.os ~ ':' ~ tpldir ~ ':' ~ tpldot ~ "
                                           "':' ~ tplfile %}"},
                       {"show.jinja", "{{ tpldir }}"}});
  value grains = value::make_dict();
  grains.dict().set("os", "Debian");
  env.globals["grains"] = grains;
  env.globals["tpldir"] = "top/dir";
  context ctx{{"tpldir", "top/dir"}};
  EXPECT_EQ(render("{% import 'nginx/map.jinja' as m %}{{ m.v }}|{{ tpldir }}|"
                   "{% include 'show.jinja' %}|{% include 'show.jinja' without context %}",
                   "top/dir/init.sls", ctx, env),
            "Debian:nginx:nginx:nginx/map.jinja|top/dir|top/dir|.");
}

TEST(Loader, WithoutALoaderEveryTemplateIsMissing) {
  EXPECT_EQ(error_of("{% import 'x' as m %}", {}),
            "template 'init.sls' line 1 column 4: TemplateNotFound: x");
  EXPECT_EQ(render("{% include 'x' ignore missing %}ok", "t", {}), "ok");
}

TEST(Registration, HostFiltersAndTestsOverrideBuiltins) {
  environment env;
  env.filters["shout"] = [](const value& in, call_args& a) -> value {
    std::string s = in.str() + "!";
    if (!a.positional.empty()) s += a.positional[0].str();
    return s;
  };
  env.filters["upper"] = [](const value&, call_args&) -> value { return "mine"; };
  env.tests["list"] = [](const value& in, call_args&) { return in.is_list(); };
  EXPECT_EQ(render("{{ 'a'|shout('x') }} {{ 'a'|upper }} {{ [1] is list }} {{ 1 is list }}", "t",
                   {}, env),
            "a!x mine True False");
  env.filters["boom"] = [](const value&, call_args&) -> value { throw template_error("no"); };
  EXPECT_EQ(error_of("\n {{ 1|boom }}", env), "template 'init.sls' line 2 column 7: no");
  // Imported templates use them too.
  auto withl = env_with({{"m", "{% set v = 'b'|shout %}"}});
  withl.filters = env.filters;
  EXPECT_EQ(render("{% from 'm' import v %}{{ v }}", "t", {}, withl), "b!");
}

TEST(Budget, MaxStepsStopsRunawayRendersAndBigProducts) {
  environment env;
  env.max_steps = 1000;
  EXPECT_NE(error_of("{% for i in range(2000) %}{% endfor %}", env)
                .find("the render took more than 1000 steps"),
            std::string::npos);
  EXPECT_NE(error_of("{{ 'x' * 10**12 }}", env).find("more than 1000 steps"), std::string::npos);
  EXPECT_NE(error_of("{{ [1] * 10**12 }}", env).find("more than 1000 steps"), std::string::npos);
  EXPECT_EQ(render("{{ 'x' * 3 }}", "t", {}, env), "xxx");
  // Without a budget, as in Jinja, there is no bound.
  EXPECT_EQ(render("{% for i in range(2000) %}{% endfor %}ok", "t", {}), "ok");
}

// Padding to a width is output the template asks for as surely as 'x' * n:
// with a budget, each pad character costs a step, so a width of 10**9
// fails at once instead of building a gigabyte.
TEST(Budget, WidthArgumentsAreCharged) {
  environment env;
  env.max_steps = 1000;
  for (const char* t :
       {"{{ 'x'.center(10**9) }}", "{{ 'x'.ljust(10**9) }}", "{{ 'x'.rjust(10**9) }}",
        "{{ 'x'.zfill(10**9) }}", "{{ 'x'|center(10**9) }}", "{{ 'x'|indent(10**9, true) }}",
        "{{ 'a\nb\nc'|indent(400) }}", "{{ '%1000000000s' % 'x' }}",
        "{{ '{:>1000000000}'.format(1) }}", "{{ '%-1000000000d'|format(1) }}",
        "{{ '{:*^1000000000}'.format('x') }}"}) {
    EXPECT_NE(error_of(t, env).find("the render took more than 1000 steps"), std::string::npos)
        << t;
  }
  // Python refuses a width past Py_ssize_t; brine past INT_MAX.
  EXPECT_NE(error_of("{{ '%10000000000s' % 'x' }}", env).find("width too big"),
            std::string::npos);
  EXPECT_NE(error_of("{{ '{:>10000000000}'.format(1) }}", env).find("width too big"),
            std::string::npos);
  // wordwrap's width builds nothing: a wide one is one line.
  EXPECT_EQ(render("{{ 'a b'|wordwrap(10**10) }}", "t", {}, env), "a b");
  // Within the budget, and without one, widths are Python's.
  EXPECT_EQ(render("{{ 'x'.center(5, '*') }}|{{ '%4s' % 1 }}|{{ 'a\nb'|indent(2) }}", "t", {},
                   env),
            "**x**|   1|a\n  b");
  EXPECT_EQ(render("{{ 'x'.ljust(200000)|length }}|{{ ('%200000s' % 1)|length }}", "t", {}),
            "200000|200000");
}

environment salt_env(const files& fs) {
  environment env = env_with(fs);
  // A stand-in for Salt's YAML loader: JSON is YAML.
  env.yaml_loader = [](std::string_view text, const std::string& name) {
    try {
      return nlohmann::ordered_json::parse(text);
    } catch (const std::exception&) {
      throw template_error("bad yaml in " + name);
    }
  };
  return env;
}

TEST(SaltTags, ImportYamlRendersTheFileThenParsesIt) {
  auto env = salt_env({{"defaults.yaml", "{\"port\": {{ 40 + 40 }}, \"g\": \"{{ g }}\"}"},
                       {"ctx.yaml", "{\"q\": {{ q }}}"},
                       {"d.json", "{\"a\": [1, 2.5, null, true]}"},
                       {"t.txt", "line {{ 1 }}\n"},
                       {"bad.json", "{nope"}});
  env.globals["g"] = "G";
  context ctx{{"q", 7}};
  EXPECT_EQ(render("{% import_yaml 'defaults.yaml' as d %}{{ d.port + 1 }} {{ d.g }}", "t", ctx,
                   env),
            "81 G");
  // As Salt builds it on `import`: without context unless asked.
  EXPECT_NE(error_of("{% import_yaml 'ctx.yaml' as d %}", env, ctx).find("'q' is undefined"),
            std::string::npos);
  EXPECT_EQ(render("{% import_yaml 'ctx.yaml' as d with context %}{{ d.q }}", "t", ctx, env), "7");
  EXPECT_EQ(render("{% import_json 'd.json' as d %}{{ d.a }}", "t", {}, env),
            "[1, 2.5, None, True]");
  EXPECT_EQ(render("{% import_text 't.txt' as t %}{{ t|length }}", "t", {}, env), "6");
  EXPECT_EQ(error_of("{% import_json 'bad.json' as d %}", env),
            "template 'init.sls' line 1 column 4: Unable to load json from {nope");
  EXPECT_EQ(error_of("{% import_yaml 'missing.yaml' as d %}", env),
            "template 'init.sls' line 1 column 4: TemplateNotFound: missing.yaml");
}

TEST(SaltTags, LoadBlocksParseTheirRenderedBody) {
  auto env = salt_env({});
  EXPECT_EQ(render("{% set n = 3 %}{% load_yaml as d %}{\"n\": {{ n }}}{% endload %}{{ d.n * 2 }}",
                   "t", {}, env),
            "6");
  EXPECT_EQ(render("{% load_json as a, b %}[1, 2]{% endload %}{{ b }}{{ a }}", "t", {}, env),
            "21");
  EXPECT_EQ(render("{% load_text as t %}  x {{ 1 }}{% endload %}[{{ t }}]", "t", {}, env),
            "[  x 1]");
  EXPECT_EQ(error_of("{% load_json as d %}[1,{% endload %}", env),
            "template 'init.sls' line 1 column 4: Unable to load json from [1,");
  EXPECT_EQ(error_of("\n{% load_yaml as d %}{% endloa %}", env),
            "template 'init.sls' line 2 column 24: Encountered unknown tag 'endloa'. Jinja was "
            "looking for the following tags: 'endload'. The innermost block that needs to be "
            "closed is 'load_yaml'.");
  // A name set inside the block stays there (Salt makes the body a macro).
  EXPECT_EQ(render("{% set x = 1 %}{% load_text as t %}{% set x = 2 %}{% endload %}{{ x }}", "t",
                   {}, env),
            "1");
}

TEST(SaltTags, YamlWithoutALoaderIsAClearError) {
  environment env = env_with({{"d.yaml", "a: 1"}});
  EXPECT_EQ(error_of("{% import_yaml 'd.yaml' as d %}", env),
            "template 'init.sls' line 1 column 4: no YAML loader: this renderer cannot read YAML "
            "(environment::yaml_loader is unset)");
  EXPECT_NE(error_of("{% load_yaml as d %}a: 1{% endload %}", env).find("no YAML loader"),
            std::string::npos);
}

TEST(SaltTags, ALoadersJsonExceptionIsATemplateError) {
  environment env;
  env.yaml_loader = [](std::string_view, const std::string&) -> nlohmann::ordered_json {
    return nlohmann::ordered_json::parse("{");
  };
  std::string e = error_of("{% load_yaml as d %}a: 1{% endload %}", env);
  EXPECT_EQ(e.rfind("template 'init.sls' line 1 column 4: Encountered error loading yaml: ", 0), 0u)
      << e;
}

TEST(SaltTags, ProfileRendersItsBody) {
  EXPECT_EQ(render("a{% profile as 'setup ' ~ 1 %}{% set x = 2 %}b{{ x }}{% endprofile %}{{ x }}",
                   "t", {}),
            "ab22");
  // Salt only logs the label (lazily): an undefined one is no error.
  EXPECT_EQ(render("{% profile as nope %}x{% endprofile %}", "t", {}), "x");
}

// Renders every table case with Python's Jinja2 as well, when it is
// installed, so that the table cannot drift from the reference.
TEST(Differential, LoaderCasesMatchPythonJinja2) {
  std::string python = testing::python_with_jinja2();
  if (python.empty()) GTEST_SKIP() << "no python3 with jinja2";
  char dir_template[] = "/tmp/brine-loader-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  std::filesystem::path dir(dir_template);
  {
    std::ofstream script(dir / "oracle.py");
    script << R"(import json, sys
import jinja2, jinja2.sandbox
out = []
for files, ctx in json.load(open(sys.argv[1])):
    env = jinja2.sandbox.SandboxedEnvironment(undefined=jinja2.StrictUndefined,
        loader=jinja2.DictLoader(json.loads(files)),
        extensions=["jinja2.ext.do", "jinja2.ext.loopcontrols"])
    try:
        out.append([True, env.get_template("main").render(**json.loads(ctx))])
    except Exception as e:
        out.append([False, str(e)])
json.dump(out, open(sys.argv[2], "w"))
)";
    auto cases = nlohmann::json::array();
    for (const auto& c : k_cases) cases.push_back({c.files, c.context});
    std::ofstream(dir / "cases.json") << cases.dump();
  }
  std::string cmd = python + " " + (dir / "oracle.py").string() + " " +
                    (dir / "cases.json").string() + " " + (dir / "out.json").string();
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::ifstream in(dir / "out.json");
  auto results = nlohmann::json::parse(in);
  std::filesystem::remove_all(dir);
  ASSERT_EQ(results.size(), std::size(k_cases));
  for (std::size_t i = 0; i < results.size(); ++i) {
    const auto& c = k_cases[i];
    bool python_ok = results[i][0].get<bool>();
    EXPECT_EQ(python_ok, !c.error) << "templates: " << c.files << "\npython: " << results[i][1];
    if (!python_ok || c.error) continue;
    try {
      EXPECT_EQ(run(c), results[i][1].get<std::string>()) << "templates: " << c.files;
    } catch (const template_error& e) {
      ADD_FAILURE() << "templates: " << c.files << "\nerror: " << e.what();
    }
  }
}

}  // namespace
}  // namespace loader_test
}  // namespace brine::render
