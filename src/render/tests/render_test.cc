#include "render/render.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "render/tests/python_oracle.h"

// Expected outputs come from Python's Jinja2 3.1 (SandboxedEnvironment with
// StrictUndefined and the do and loopcontrols extensions, as Salt builds it).
// Error cases list the text brine's message must contain; Jinja raises for each
// of them too.
namespace brine::render {
namespace {

struct render_case {
  const char* source;
  const char* context;
  const char* flags;     // t: trim_blocks, l: lstrip_blocks, k: keep_trailing_newline
  const char* expected;  // output, or a part of the error message
  bool error;
};

const render_case k_cases[] = {
#include "render/tests/jinja_cases.inc"
};

environment env_for(const std::string& flags) {
  environment env;
  env.trim_blocks = flags.find('t') != std::string::npos;
  env.lstrip_blocks = flags.find('l') != std::string::npos;
  env.keep_trailing_newline = flags.find('k') != std::string::npos;
  return env;
}

std::string run(const render_case& c) {
  return render_json(c.source, "case.sls", nlohmann::ordered_json::parse(c.context),
                     env_for(c.flags));
}

class JinjaCases : public ::testing::TestWithParam<render_case> {};

TEST_P(JinjaCases, RendersAsJinja) {
  const render_case& c = GetParam();
  if (!c.error) {
    try {
      EXPECT_EQ(run(c), c.expected) << "template: " << c.source;
    } catch (const template_error& e) {
      ADD_FAILURE() << "template: " << c.source << "\nerror: " << e.what();
    }
    return;
  }
  try {
    std::string out = run(c);
    ADD_FAILURE() << "template: " << c.source << "\nexpected an error, got: " << out;
  } catch (const template_error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find(c.expected), std::string::npos)
        << "template: " << c.source << "\nerror: " << what;
    EXPECT_EQ(what.rfind("template 'case.sls' line ", 0), 0u) << what;
  }
}

INSTANTIATE_TEST_SUITE_P(Table, JinjaCases, ::testing::ValuesIn(k_cases));

TEST(Render, ErrorNamesTemplateLineAndColumn) {
  try {
    render_json("a\nb\n  {% for x in l %}{{ x }}{% endif %}", "x.sls", {{"l", {1}}});
    FAIL() << "no error";
  } catch (const template_error& e) {
    EXPECT_STREQ(e.what(),
                 "template 'x.sls' line 3 column 29: unknown tag 'endif', expected 'else' or "
                 "'endfor' to close 'for'");
  }
  try {
    render_json("{% set a = 1 %}\n\n   {{ a ~ missing }}", "y.sls",
                nlohmann::ordered_json::object());
    FAIL() << "no error";
  } catch (const template_error& e) {
    EXPECT_STREQ(e.what(), "template 'y.sls' line 3 column 11: 'missing' is undefined");
  }
}

TEST(Render, HostCallableGetsPositionalAndKeywordArguments) {
  context ctx;
  std::vector<std::string> seen;
  ctx["salt"] = value::make_dict();
  ctx["salt"].dict().set("pillar.get",
                         value::make_callable("pillar.get", [&](call_args& a) -> value {
                           std::string s;
                           for (auto& p : a.positional) s += p.repr() + ",";
                           for (auto& [k, v] : a.keyword) s += k + "=" + v.repr() + ",";
                           seen.push_back(s);
                           return value("v");
                         }));
  EXPECT_EQ(render("{{ salt['pillar.get']('a:b', default=[1]) }}", "t", ctx), "v");
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], "'a:b',default=[1],");
}

TEST(Render, HostCallableErrorsCarryThePosition) {
  context ctx;
  ctx["boom"] =
      value::make_callable("boom", [](call_args&) -> value { throw template_error("it broke"); });
  EXPECT_THROW(
      {
        try {
          render("\n  {{ boom() }}", "t.sls", ctx);
        } catch (const template_error& e) {
          EXPECT_STREQ(e.what(), "template 't.sls' line 2 column 6: it broke");
          throw;
        }
      },
      template_error);
}

TEST(Render, SaltPutsBackTheTrailingNewline) {
  auto env = environment::salt();
  EXPECT_EQ(render("a: {{ 1 }}\n", "t", {}, env), "a: 1\n");
  EXPECT_EQ(render("a: 1", "t", {}, env), "a: 1");
  EXPECT_EQ(render("a: 1\n", "t", {}), "a: 1");
  EXPECT_FALSE(env.trim_blocks);
  EXPECT_FALSE(env.lstrip_blocks);
}

TEST(Render, ListsAreSharedBetweenNames) {
  context ctx;
  ctx["l"] = value::make_list({value(1)});
  EXPECT_EQ(render("{% do l.append(2) %}{{ l }}", "t", ctx), "[1, 2]");
  EXPECT_EQ(ctx["l"].items().size(), 2u);
}

TEST(Render, DeepRecursionIsAnErrorNotACrash) {
  EXPECT_THROW(render("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "t", {}), template_error);
}

TEST(Value, FloatReprMatchesPython) {
  EXPECT_EQ(float_repr(0.1), "0.1");
  EXPECT_EQ(float_repr(1e16), "1e+16");
  EXPECT_EQ(float_repr(1e15), "1000000000000000.0");
  EXPECT_EQ(float_repr(0.0001), "0.0001");
  EXPECT_EQ(float_repr(0.00001), "1e-05");
  EXPECT_EQ(float_repr(-2.5), "-2.5");
  EXPECT_EQ(float_repr(1.0 / 3), "0.3333333333333333");
}

// Every prefix of every case, and cases with bytes changed, either render or
// fail with a template_error: no other exception, no sanitizer report.
TEST(Robustness, BrokenTemplatesAreTemplateErrors) {
  const std::string noise = "{}%#-+()[]'\",.|~*/ \n\\x0";
  unsigned seed = 12345;
  auto next = [&] {
    seed = seed * 1103515245u + 12345u;
    return (seed >> 16) & 0x7fff;
  };
  int rendered = 0;
  int refused = 0;
  auto attempt = [&](const std::string& source, const render_case& c) {
    try {
      render_json(source, "fuzz.sls", nlohmann::ordered_json::parse(c.context), env_for(c.flags));
      ++rendered;
    } catch (const template_error&) {
      ++refused;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "template: " << source << "\nthrew " << e.what();
    }
  };
  for (const auto& c : k_cases) {
    std::string source = c.source;
    for (std::size_t n = 0; n < source.size(); ++n) attempt(source.substr(0, n), c);
    for (int k = 0; k < 20 && !source.empty(); ++k) {
      std::string changed = source;
      std::size_t at = next() % changed.size();
      char with = noise[next() % noise.size()];
      if (next() % 2) {
        changed[at] = with;
      } else {
        changed.insert(at, 1, with);
      }
      attempt(changed, c);
    }
  }
  EXPECT_GT(rendered, 0);
  EXPECT_GT(refused, 0);
}

// Renders every table case with Python's Jinja2 as well, when it is installed,
// so that the table cannot drift from the reference implementation.
TEST(Differential, MatchesPythonJinja2) {
  std::string python = testing::python_with_jinja2();
  if (python.empty()) GTEST_SKIP() << "python3 with jinja2 not found";
  char dir_template[] = "/tmp/brine-render-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  std::filesystem::path dir(dir_template);
  {
    std::ofstream script(dir / "oracle.py");
    script << R"(import json, sys
import jinja2, jinja2.sandbox
out = []
for t, ctx, flags in json.load(open(sys.argv[1])):
    env = jinja2.sandbox.SandboxedEnvironment(undefined=jinja2.StrictUndefined,
        extensions=["jinja2.ext.do", "jinja2.ext.loopcontrols"],
        trim_blocks="t" in flags, lstrip_blocks="l" in flags, keep_trailing_newline="k" in flags)
    try:
        out.append([True, env.from_string(t).render(**json.loads(ctx))])
    except Exception as e:
        out.append([False, str(e)])
json.dump(out, open(sys.argv[2], "w"))
)";
    auto cases = nlohmann::json::array();
    for (const auto& c : k_cases) cases.push_back({c.source, c.context, c.flags});
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
    EXPECT_EQ(python_ok, !c.error) << "template: " << c.source << "\npython: " << results[i][1];
    if (!python_ok || c.error) continue;
    try {
      EXPECT_EQ(run(c), results[i][1].get<std::string>()) << "template: " << c.source;
    } catch (const template_error& e) {
      ADD_FAILURE() << "template: " << c.source << "\nerror: " << e.what();
    }
  }
}

}  // namespace
}  // namespace brine::render
