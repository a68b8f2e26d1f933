#include "pillar/pillar.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "base/error.h"
#include "pillar/merge.h"
#include "pillar/render.h"
#include "support/temp_dir.h"

namespace brine::pillar {
namespace {

using nlohmann::json;
using strings = std::vector<std::string>;

// A pillar tree on disk: files written under one temp dir, one subdirectory
// per root.
class files {
 public:
  // Writes `text` to `rel` (e.g. "base/top.sls"), creating directories.
  files& write(const std::string& rel, const std::string& text) {
    std::filesystem::path p = dir_.file(rel);
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return *this;
  }
  std::string root(const std::string& rel) const { return dir_.file(rel); }

 private:
  test::temp_dir dir_{"brine-pillar"};
};

options base_only(const files& f) {
  options o;
  o.roots = {{"base", {f.root("base")}}};
  return o;
}

json web1_grains() {
  return json::parse(R"({"id": "web1", "os": "Debian", "os_family": "Debian",
    "roles": ["web", "cache"], "ipv4": ["10.0.0.11", "127.0.0.1"], "num_cpus": 4})");
}

compiler::result compile(const options& o, std::string_view id, const json* grains) {
  return compiler::load(o).compile(id, grains);
}

// ---- rendering one file

json render(const std::string& text) { return detail::render_text<json>(text, "/p/x.sls"); }

std::string render_error(const std::string& text) {
  try {
    render(text);
  } catch (const detail::render_error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Render, Yaml11ScalarsAsSaltsLoader) {
  json d = render("a: yes\nb: 0x10\nc: '1'\nd: 1.5\ne: ~\nf: Off\ng: 2024-01-02\n");
  EXPECT_EQ(d, json::parse(R"({"a": true, "b": 16, "c": "1", "d": 1.5, "e": null, "f": false,
    "g": "2024-01-02"})"));
}

TEST(Render, LeadingZeroIntegersAreDecimalAsInSaltsLoader) {
  json d = render("mode: 0644\nzero: 00\nneg: -010\nhex: 0x10\nnine: 09\nkeyed:\n  0755: x\n");
  EXPECT_EQ(d, json::parse(R"({"mode": 644, "zero": 0, "neg": -8, "hex": 16, "nine": "09",
    "keyed": {"755": "x"}})"));
  EXPECT_EQ(render("mode: '0644'\n")["mode"], "0644");
}

TEST(Render, EmptyFileIsNull) {
  EXPECT_TRUE(render("").is_null());
  EXPECT_TRUE(render("# just a comment\n").is_null());
}

TEST(Render, Errors) {
  struct row {
    std::string text;
    std::string error;
  };
  const row rows[] = {
      // Salt's loader refuses duplicate keys, at any depth.
      {"a: 1\nb: 2\na: 3\n", "pillar file /p/x.sls line 3 column 1: found conflicting ID 'a'"},
      {"top:\n  x: 1\n  x: 2\n", "pillar file /p/x.sls line 3 column 3: found conflicting ID 'x'"},
      {"yes: 1\ntrue: 2\n", "pillar file /p/x.sls line 2 column 1: found conflicting ID 'true'"},
      // Syntax errors in libyaml's words (PyYAML's C loader), its context after the problem.
      {"a: [1, 2\nb: 3\n",
       "pillar file /p/x.sls line 2 column 2: did not find expected ',' or ']' (while parsing a "
       "flow sequence at line 1 column 4)"},
      {"a:\n  b: 1\n c: 2\n",
       "pillar file /p/x.sls line 3 column 2: did not find expected key (while parsing a block "
       "mapping at line 1 column 1)"},
      {"a: 1\n---\nb: 2\n",
       "pillar file /p/x.sls line 2 column 1: expected a single document in the stream, but "
       "found another"},
      {"a: !secret x\n",
       "pillar file /p/x.sls line 1 column 4: could not determine a constructor for the tag "
       "'!secret'"},
      {"? [a, b]\n: 1\n", "pillar file /p/x.sls line 1 column 3: found unacceptable key"},
      {"x: &x {a: 1}\ny:\n  <<: 5\n",
       "pillar file /p/x.sls line 3 column 7: expected a mapping or list of mappings for "
       "merging, but found scalar"},
  };
  for (const auto& r : rows) EXPECT_EQ(render_error(r.text), r.error) << r.text;
}

TEST(Render, MergeKeysAsSaltsLoader) {
  json d = render("defaults: &d {port: 80, tls: false}\nsite:\n  <<: *d\n  port: 8080\n");
  EXPECT_EQ(d["site"], json::parse(R"({"port": 8080, "tls": false})"));
  // Salt's loader puts every merged entry in one mapping: two merged
  // mappings with the same key conflict.
  EXPECT_NE(render_error("a: &a {x: 1}\nb: &b {x: 2}\nc:\n  <<: [*a, *b]\n")
                .find("found conflicting ID 'x'"),
            std::string::npos);
}

TEST(Render, MergeKeyListTakesEveryMapping) {
  json d = render("a: &a {x: 1, y: 2}\nb: &b {z: 3}\nc:\n  <<: [*a, *b]\n  y: 20\n");
  EXPECT_EQ(d["c"], json::parse(R"({"x": 1, "y": 20, "z": 3})"));
}

TEST(Render, RendererShebangs) {
  struct row {
    std::string text;
    std::string error;  // empty: accepted
  };
  const row rows[] = {
      {"a: 1\n", ""},
      {"#!yaml\na: '{{ not jinja here }}'\n", ""},
      {"#!jinja|yaml\na: 1\n", ""},
      {"#! jinja | yaml\na: 1\n", ""},
      {"#!yaml|jinja\na: 1\n", ""},
      {"#!/usr/bin/env whatever\na: 1\n", ""},  // a path is not a renderer line
      // Templates render for a minion (Templates.* below); without one, an error.
      {"#!jinja|yaml\na: 1\nb: {{ grains.id }}\n", "pillar file /p/x.sls is a Jinja template: it renders for a minion, with its grains"},
      {"a: 1\n{% if true %}\nb: 2\n{% endif %}\n", "pillar file /p/x.sls is a Jinja template: it renders for a minion, with its grains"},
      {"{# a comment #}\na: 1\n", "pillar file /p/x.sls is a Jinja template: it renders for a minion, with its grains"},
      {"#!yaml|gpg\na: 1\n",
       "pillar file /p/x.sls line 1: the gpg renderer needs the host's gpg settings, which this "
       "compile was not given"},
      {"#!py\ndef run(): return {}\n",
       "pillar file /p/x.sls line 1: renderer 'py' (in /p/x.sls) runs Python code, which brine "
       "does not run: write the file as #!jinja|yaml (the data as YAML, the logic as Jinja, "
       "Python's calls as salt['module.function'](...))"},
      {"#!pyobjects\nFile.managed('/x')\n",
       "pillar file /p/x.sls line 1: renderer 'pyobjects' (in /p/x.sls) runs Python code, which "
       "brine does not run: write the file as #!jinja|yaml (the data as YAML, the logic as "
       "Jinja, Python's calls as salt['module.function'](...))"},
      {"#!mako|yaml\na: 1\n",
       "pillar file /p/x.sls line 1: renderer '#!mako|yaml' is not supported; brine renders "
       "pillar files as #!yaml or #!jinja|yaml (the default), either followed by |gpg"},
  };
  for (const auto& r : rows) {
    std::string got = render_error(r.text);
    EXPECT_EQ(got, r.error.empty() ? "(no error)" : r.error) << r.text;
  }
}

// ---- merging

TEST(Merge, Strategies) {
  const json a = json::parse(R"({"x": {"p": 1, "q": [1, 2], "r": "old"}, "keep": true})");
  const json b = json::parse(R"({"x": {"p": 2, "q": [2, 3, 3], "s": "new"}, "y": 1})");
  struct row {
    strategy s;
    bool merge_lists;
    std::string want;
  };
  const row rows[] = {
      {strategy::smart, false,
       R"({"x": {"p": 2, "q": [2, 3, 3], "r": "old", "s": "new"}, "keep": true, "y": 1})"},
      {strategy::recurse, false,
       R"({"x": {"p": 2, "q": [2, 3, 3], "r": "old", "s": "new"}, "keep": true, "y": 1})"},
      // Items of the new list that the old one lacks are appended; a
      // duplicate within the new list stays (Salt checks the old list only).
      {strategy::recurse, true,
       R"({"x": {"p": 2, "q": [1, 2, 3, 3], "r": "old", "s": "new"}, "keep": true, "y": 1})"},
      {strategy::smart, true,
       R"({"x": {"p": 2, "q": [1, 2, 3, 3], "r": "old", "s": "new"}, "keep": true, "y": 1})"},
      {strategy::none, true,
       R"({"x": {"p": 2, "q": [2, 3, 3], "r": "old", "s": "new"}, "keep": true, "y": 1})"},
      {strategy::overwrite, true,
       R"({"x": {"p": 2, "q": [2, 3, 3], "s": "new"}, "keep": true, "y": 1})"},
      {strategy::aggregate, false,
       R"({"x": {"p": 2, "q": [2, 3, 3], "s": "new"}, "keep": true, "y": 1})"},
  };
  for (const auto& r : rows) {
    json d = a;
    detail::merge(d, b, r.s, r.merge_lists);
    EXPECT_EQ(d, json::parse(r.want)) << static_cast<int>(r.s) << " " << r.merge_lists;
  }
}

TEST(Merge, ScalarOverMappingAndBack) {
  json d = json::parse(R"({"a": {"b": 1}, "c": 5})");
  detail::merge(d, json::parse(R"({"a": "flat", "c": {"d": 1}})"), strategy::smart, false);
  EXPECT_EQ(d, json::parse(R"({"a": "flat", "c": {"d": 1}})"));
}

TEST(Options, BadOnesThrow) {
  files f;
  options o = base_only(f);
  o.merging_strategy = "deep";
  try {
    compiler::load(o);
    FAIL();
  } catch (const base::error& e) {
    EXPECT_EQ(std::string(e.what()),
              "pillar_source_merging_strategy must be one of smart, recurse, aggregate, "
              "overwrite, none; got 'deep'");
  }
  o = base_only(f);
  o.pillarenv = "prod";
  try {
    compiler::load(o);
    FAIL();
  } catch (const base::error& e) {
    EXPECT_EQ(std::string(e.what()),
              "pillarenv 'prod' is not an environment of pillar_roots (base); add it to "
              "pillar_roots or unset pillarenv");
  }
  for (auto s : {"smart", "recurse", "aggregate", "overwrite", "none"}) {
    o = base_only(f);
    o.merging_strategy = s;
    EXPECT_NO_THROW(compiler::load(o)) << s;
  }
}

// ---- top file

TEST(Top, EveryMatchType) {
  files f;
  f.write("base/hit.sls", "hit: true\n");
  const options o = base_only(f);
  const json grains = web1_grains();
  struct row {
    std::string target;
    std::string match;  // empty: no match item (compound)
    bool hit;
  };
  const row rows[] = {
      {"*", "", true},
      {"web*", "", true},
      {"db*", "", false},
      {"web1", "glob", true},
      {"web[0-9]", "glob", true},
      {"web1,db1", "", false},  // compound: a word with a comma is a glob
      {"web1,db1", "list", true},
      {"db1,db2", "list", false},
      {"^web\\d$", "pcre", true},
      {"^db", "pcre", false},
      {"os:Debian", "grain", true},
      {"roles:cache", "grain", true},
      {"os:RedHat", "grain", false},
      {"os:Deb.*", "grain_pcre", true},
      {"10.0.0.0/24", "ipcidr", true},
      {"192.168.0.0/16", "ipcidr", false},
      {"G@os:Debian and web*", "compound", true},
      {"G@os:Debian and not web1", "", false},
      {"L@db1,web1 or E@^x", "", true},
      {"S@10.0.0.0/8 and G@num_cpus:4", "", true},
      {"webs", "nodegroup", true},
      {"dbs", "nodegroup", false},
      {"N@webs and G@os:Debian", "", true},
      // Pillar terms match against the master's own (empty) pillar.
      {"role:web", "pillar", false},
      {"role:.*", "pillar_pcre", false},
      {"not I@role:web", "", true},
  };
  for (const auto& r : rows) {
    std::string item = r.match.empty() ? "" : "    - match: " + r.match + "\n";
    f.write("base/top.sls", "base:\n  '" + r.target + "':\n" + item + "    - hit\n");
    options oo = o;
    oo.groups = {{"webs", std::string("web* and G@os:Debian")},
                 {"dbs", std::vector<std::string>{"db1", "db2"}}};
    auto res = compile(oo, "web1", &grains);
    EXPECT_TRUE(res.errors.empty()) << r.target << ": " << json(res.errors).dump();
    EXPECT_EQ(res.pillar.contains("hit"), r.hit) << r.target << " match " << r.match;
  }
}

TEST(Top, UncachedGrainsMatchNoGrainTerm) {
  files f;
  f.write("base/top.sls", R"(base:
  '*':
    - common
  'os:Debian':
    - match: grain
    - debian
  'not G@os:Debian':
    - not_debian
  '10.0.0.0/8':
    - match: ipcidr
    - net
)");
  f.write("base/common.sls", "common: 1\n");
  f.write("base/debian.sls", "debian: 1\n");
  f.write("base/not_debian.sls", "not_debian: 1\n");
  f.write("base/net.sls", "net: 1\n");
  auto c = compiler::load(base_only(f));
  auto uncached = c.compile("web1", nullptr);
  EXPECT_EQ(uncached.pillar, json::parse(R"({"common": 1, "not_debian": 1})"));
  EXPECT_TRUE(uncached.errors.empty());
  json grains = web1_grains();
  EXPECT_EQ(c.compile("web1", &grains).pillar,
            json::parse(R"({"common": 1, "debian": 1, "net": 1})"));
}

TEST(Top, OrderOfTargetsIsMergeOrder) {
  files f;
  f.write("base/top.sls", R"(base:
  'web*':
    - web
  '*':
    - common
  'web1':
    - order: -1
    - first
)");
  f.write("base/common.sls", "who: common\nlevel: {common: 1}\n");
  f.write("base/web.sls", "who: web\nlevel: {web: 1}\n");
  f.write("base/first.sls", "who: first\nlevel: {first: 1}\n");
  auto r = compile(base_only(f), "web1", nullptr);
  // first (order -1), then web, then common: common's value wins.
  EXPECT_EQ(r.pillar, json::parse(R"({"who": "common",
    "level": {"common": 1, "web": 1, "first": 1}})"));
  EXPECT_EQ(compile(base_only(f), "web2", nullptr).pillar["who"], "common");
}

TEST(Top, SlsNamesAndFiles) {
  files f;
  f.write("base/top.sls", R"(base:
  '*':
    - users.*
    - app
    - app.db
    - deep/path
    - common
    - common
)");
  f.write("base/users/alice.sls", "users: {alice: 1}\n");
  f.write("base/users/bob/init.sls", "users: {bob: 1}\n");
  f.write("base/app.sls", "app: file\n");  // app.sls wins over app/init.sls
  f.write("base/app/init.sls", "app: init\n");
  f.write("base/app/db.sls", "db: 1\n");
  f.write("base/deep/path.sls", "deep: 1\n");  // a name with '/' is a path
  f.write("base/common.sls", "list: [1]\n");
  options o = base_only(f);
  o.merge_lists = true;
  auto r = compile(o, "m", nullptr);
  EXPECT_TRUE(r.errors.empty()) << json(r.errors).dump();
  EXPECT_EQ(r.pillar, json::parse(R"({"users": {"alice": 1, "bob": 1}, "app": "file",
    "db": 1, "deep": 1, "list": [1]})"));
}

TEST(Top, FirstRootHoldingAFileWins) {
  files f;
  f.write("one/top.sls", "base:\n  '*':\n    - a\n    - b\n");
  f.write("two/top.sls", "base:\n  '*':\n    - never\n");
  f.write("one/a.sls", "a: one\n");
  f.write("two/a.sls", "a: two\n");
  f.write("two/b.sls", "b: two\n");
  options o;
  o.roots = {{"base", {f.root("one"), f.root("two")}}};
  auto r = compile(o, "m", nullptr);
  EXPECT_TRUE(r.errors.empty());
  EXPECT_EQ(r.pillar, json::parse(R"({"a": "one", "b": "two"})"));
}

TEST(Top, SeveralEnvironments) {
  files f;
  f.write("base/top.sls", R"(base:
  '*':
    - common
dev:
  'web*':
    - tools
)");
  f.write("dev/top.sls", R"(dev:
  '*':
    - devonly
)");
  f.write("base/common.sls", "common: base\nwho: base\n");
  f.write("dev/tools.sls", "tools: dev\nwho: dev\n");
  f.write("dev/devonly.sls", "devonly: 1\n");
  f.write("dev/common.sls", "common: dev-copy\n");
  options o;
  o.roots = {{"base", {f.root("base")}}, {"dev", {f.root("dev")}}};
  auto r = compile(o, "web1", nullptr);
  EXPECT_TRUE(r.errors.empty()) << json(r.errors).dump();
  // base's sls from base's roots, dev's from dev's: base first.
  EXPECT_EQ(r.pillar, json::parse(R"({"common": "base", "tools": "dev", "who": "dev",
    "devonly": 1})"));
  EXPECT_EQ(compile(o, "db1", nullptr).pillar,
            json::parse(R"({"common": "base", "who": "base", "devonly": 1})"));

  // pillarenv: only dev's top file, only dev's targets.
  o.pillarenv = "dev";
  EXPECT_EQ(compile(o, "web1", nullptr).pillar, json::parse(R"({"devonly": 1})"));

  // none: only base's top file (with its dev section).
  o.pillarenv.reset();
  o.merging_strategy = "none";
  EXPECT_EQ(compile(o, "web1", nullptr).pillar,
            json::parse(R"({"common": "base", "tools": "dev", "who": "dev"})"));
}

TEST(Top, LaterTopFileReplacesSameTarget) {
  files f;
  f.write("base/top.sls", "dev:\n  '*':\n    - one\n");
  f.write("dev/top.sls", "dev:\n  '*':\n    - two\n");
  f.write("dev/one.sls", "one: 1\n");
  f.write("dev/two.sls", "two: 2\n");
  options o;
  o.roots = {{"base", {f.root("base")}}, {"dev", {f.root("dev")}}};
  EXPECT_EQ(compile(o, "m", nullptr).pillar, json::parse(R"({"two": 2})"));
}

TEST(Top, EnvironmentWithoutRoots) {
  files f;
  f.write("base/top.sls", "base:\n  '*':\n    - a\nqa:\n  '*':\n    - x\n    - y\n");
  f.write("base/a.sls", "a: 1\n");
  auto r = compile(base_only(f), "m", nullptr);
  EXPECT_EQ(r.pillar, json::parse(R"({"a": 1})"));
  EXPECT_EQ(r.errors, (strings{"No matching pillar environment for environment 'qa' found",
                               "No matching pillar environment for environment 'qa' found"}));
}

TEST(Top, IncludedTopFile) {
  files f;
  f.write("base/top.sls", "include:\n  - more.top\nbase:\n  '*':\n    - a\n");
  // An included top file's own include is not followed (nor an error).
  f.write("base/more/top.sls", "include: [last]\nbase:\n  'web*':\n    - b\n");
  f.write("base/last.sls", "base:\n  '*':\n    - c\n");
  f.write("base/c.sls", "c: 1\n");
  f.write("base/a.sls", "a: 1\n");
  f.write("base/b.sls", "b: 1\n");
  auto c = compiler::load(base_only(f));
  auto web = c.compile("web1", nullptr);
  EXPECT_TRUE(web.errors.empty()) << json(web.errors).dump();
  EXPECT_EQ(web.pillar, json::parse(R"({"a": 1, "b": 1})"));
  EXPECT_EQ(c.compile("db1", nullptr).pillar, json::parse(R"({"a": 1})"));
}

TEST(Top, Errors) {
  files f;
  f.write("base/a.sls", "a: 1\n");
  struct row {
    std::string top;
    json pillar;
    strings errors;
  };
  const std::string path = f.root("base/top.sls");
  const row rows[] = {
      {"base:\n  '*':\n    - a\n    - gone\n",
       {{"a", 1}},
       {"Specified SLS 'gone' in environment 'base' is not available on the salt master"}},
      {"base:\n  '*':\n    - ignore_missing: true\n    - a\n    - gone\n", {{"a", 1}}, {}},
      {"base:\n  'G@os:Debian and and x':\n    - gone\n  '*':\n    - a\n",
       {{"a", 1}},
       {"Error encountered while rendering pillar top file " + path +
        ": environment 'base', target 'G@os:Debian and and x': target 'G@os:Debian and and "
        "x': expected a target after 'and' at word 3, got 'and'"}},
      {"base:\n  'x':\n    - match: range\n    - gone\n  '*':\n    - a\n",
       {{"a", 1}},
       {"Error encountered while rendering pillar top file " + path +
        ": environment 'base', target 'x': unknown match type 'range'; brine matches glob, "
        "pcre, list, grain, grain_pcre, pillar, pillar_pcre, ipcidr, nodegroup and compound"}},
      {"base:\n  'nosuch':\n    - match: nodegroup\n    - gone\n  '*':\n    - a\n",
       {{"a", 1}},
       {}},  // filled in below: the target module's message
      {"base:\n  '*': a\n",
       json::object(),
       {"Error encountered while rendering pillar top file " + path +
        ": environment 'base', target '*' must map to a list of sls names"}},
      {"base: [a]\n",
       json::object(),
       {"Error encountered while rendering pillar top file " + path +
        ": environment 'base' must map targets to lists of sls names"}},
      {"base:\n  '*':\n    - a\n  '*':\n    - b\n",
       json::object(),
       {"Rendering Primary Top file failed, render error:\npillar file " + path +
        " line 4 column 3: found conflicting ID '*'"}},
      {"base:\n  '*':\n  - a\n - b\n",
       json::object(),
       {"Rendering Primary Top file failed, render error:\npillar file " + path +
        " line 4 column 2: did not find expected key (while parsing a block mapping at line 1 "
        "column 1)"}},
      {"base:\n  '{{ grains.id }}':\n    - a\n",
       json::object(),
       // No grains cached: Salt renders with grains {}.
       {"Rendering Primary Top file failed, render error:\npillar file " + path +
        ": template 'top.sls' line 2 column 7: 'dict object' has no attribute 'id'"}},
  };
  for (const auto& r : rows) {
    f.write("base/top.sls", r.top);
    auto got = compile(base_only(f), "web1", nullptr);
    EXPECT_EQ(got.pillar, r.pillar) << r.top;
    if (r.top.find("nodegroup") != std::string::npos) {
      ASSERT_EQ(got.errors.size(), 1u);
      EXPECT_TRUE(got.errors[0].starts_with("Error encountered while rendering pillar top file " +
                                            path + ": environment 'base', target 'nosuch': "))
          << got.errors[0];
      EXPECT_NE(got.errors[0].find("nosuch"), std::string::npos);
      continue;
    }
    EXPECT_EQ(got.errors, r.errors) << r.top;
  }
}

TEST(Top, NoTopFileIsAnEmptyPillar) {
  files f;
  f.write("base/a.sls", "a: 1\n");
  auto r = compile(base_only(f), "m", nullptr);
  EXPECT_EQ(r.pillar, json::object());
  EXPECT_TRUE(r.errors.empty());
}

// ---- sls files

TEST(Sls, ErrorsAreReportedAndTheRestCompiles) {
  files f;
  f.write("base/top.sls",
          "base:\n  '*':\n    - good\n    - broken\n    - jinja\n"
          "    - listy\n    - empty\n    - falsy\n    - gpg\n");
  f.write("base/good.sls", "good: 1\n");
  f.write("base/broken.sls", "a: 1\nb:\n  c: [1\n");
  f.write("base/jinja.sls", "a: 1\n\nb: {{ salt['pillar.get']('x') }}\n");
  f.write("base/listy.sls", "- a\n- b\n");
  f.write("base/empty.sls", "");
  f.write("base/falsy.sls", "0\n");
  f.write("base/gpg.sls", "#!yaml|gpg\nsecret: x\n");
  auto r = compile(base_only(f), "m", nullptr);
  EXPECT_EQ(r.pillar, json::parse(R"({"good": 1})"));
  const std::string base = f.root("base");
  EXPECT_EQ(r.errors,
            (strings{
                "Rendering SLS 'broken' failed, render error:\npillar file " + base +
                    "/broken.sls line 4 column 1: did not find expected ',' or ']' (while "
                    "parsing a flow sequence at line 3 column 6)",
                "Rendering SLS 'jinja' failed, render error:\npillar file " + base +
                    "/jinja.sls: template 'jinja.sls' line 3 column 7: 'salt' is undefined",
                "SLS 'listy' does not render to a dictionary",
                "Rendering SLS 'gpg' failed, render error:\npillar file " + base +
                    "/gpg.sls line 1: the gpg renderer needs the host's gpg settings, which "
                    "this compile was not given",
            }));
}

TEST(Sls, Include) {
  files f;
  f.write("base/top.sls", "base:\n  '*':\n    - app.web\n");
  // app/web.sls includes a sibling relatively, a package's init, an
  // absolute name under a key, and a glob.
  f.write("base/app/web.sls", R"(include:
  - .common
  - db
  - users.admin:
      key: people:admins
      defaults: {unused: 1}
  - roles.*
port: 8080
name: web
)");
  f.write("base/app/common.sls", "port: 80\nname: common\ncommon: true\n");
  f.write("base/db/init.sls", "include:\n  - .conf\ndb: {engine: pg}\n");
  f.write("base/db/conf.sls", "db: {engine: mysql, size: 10}\n");
  f.write("base/users/admin.sls", "alice: {uid: 1000}\n");
  f.write("base/roles/a.sls", "roles: [a]\n");
  f.write("base/roles/b.sls", "roles: [b]\n");
  auto r = compile(base_only(f), "m", nullptr);
  EXPECT_TRUE(r.errors.empty()) << json(r.errors).dump();
  EXPECT_EQ(r.pillar, json::parse(R"({
    "port": 8080, "name": "web", "common": true,
    "db": {"engine": "pg", "size": 10},
    "people": {"admins": {"alice": {"uid": 1000}}},
    "roles": ["b"]})"));
}

// Salt's dicts keep insertion order: each file's mappings in document
// order, the first include as the base, a key keeping its first place when
// a later layer changes it, new keys last. `ordered` keeps that order.
TEST(Sls, OrderedPillarKeepsSaltsKeyOrder) {
  files f;
  f.write("base/top.sls", "base:\n  '*':\n    - zeta\n    - alpha\n");
  f.write("base/zeta.sls", R"(include:
  - inc
zoo: {z: 1, b: 2, a: 3}
mid: 1
)");
  f.write("base/inc.sls", "mid: 0\nzoo: {y: 0, a: 0}\nfirst: true\n");
  f.write("base/alpha.sls", "zoo: {c: 4}\nlast: [1]\nmid: 2\n");
  auto r = compile(base_only(f), "m", nullptr);
  EXPECT_TRUE(r.errors.empty()) << json(r.errors).dump();
  EXPECT_EQ(r.ordered.dump(),
            R"({"mid":2,"zoo":{"y":0,"a":3,"z":1,"b":2,"c":4},"first":true,"last":[1]})");
  EXPECT_EQ(r.pillar, json(r.ordered));
}

TEST(Sls, IncludeWithMergeLists) {
  files f;
  f.write("base/top.sls", "base:\n  '*':\n    - r\n");
  f.write("base/r.sls", "include: [roles.a, roles.b]\nroles: [c, a]\n");
  f.write("base/roles/a.sls", "roles: [a]\n");
  f.write("base/roles/b.sls", "roles: [b, a]\n");
  options o = base_only(f);
  o.merge_lists = true;
  EXPECT_EQ(compile(o, "m", nullptr).pillar, json::parse(R"({"roles": ["a", "b", "c"]})"));
  o.merge_lists = false;
  EXPECT_EQ(compile(o, "m", nullptr).pillar, json::parse(R"({"roles": ["c", "a"]})"));
}

TEST(Sls, RelativeIncludeAlsoTakesTheRootNameAsSalt3006Does) {
  files f;
  f.write("base/top.sls", "base:\n  '*':\n    - app\n");
  f.write("base/app.sls", "include: [.common]\n");
  f.write("base/common.sls", "root: 1\n");
  // app.sls is not an init file, so `.common` is the root's `common`.
  EXPECT_EQ(compile(base_only(f), "m", nullptr).pillar, json::parse(R"({"root": 1})"));

  f.write("base/svc/init.sls", "include: [.common]\n");
  f.write("base/svc/common.sls", "svc: 1\n");
  f.write("base/top.sls", "base:\n  '*':\n    - svc\n");
  EXPECT_EQ(compile(base_only(f), "m", nullptr).pillar, json::parse(R"({"root": 1, "svc": 1})"));
}

TEST(Sls, IncludeCyclesAndRepeats) {
  files f;
  f.write("base/top.sls", "base:\n  '*':\n    - a\n    - b\n");
  f.write("base/a.sls", "include: [b]\na: 1\nwho: a\n");
  f.write("base/b.sls", "include: [a]\nb: 1\nwho: b\n");
  auto r = compile(base_only(f), "m", nullptr);
  EXPECT_TRUE(r.errors.empty());
  // a: includes b (b's include of a is already in mods: a's own data), then
  // b is rendered again at top level and wins.
  EXPECT_EQ(r.pillar, json::parse(R"({"a": 1, "b": 1, "who": "b"})"));
}

TEST(Sls, IncludeErrors) {
  files f;
  f.write("base/top.sls", "base:\n  '*':\n    - a\n    - b\n    - c\n");
  f.write("base/a.sls", "include: [gone]\na: 1\n");
  f.write("base/b.sls", "include: notalist\nb: 1\n");
  f.write("base/c.sls", "include:\n  - 5\n  - {x: 1, y: 2}\nc: 1\n");
  auto r = compile(base_only(f), "m", nullptr);
  EXPECT_EQ(r.pillar, json::parse(R"({"a": 1, "b": 1, "include": "notalist", "c": 1})"));
  EXPECT_EQ(r.errors,
            (strings{"Specified SLS 'gone' in environment 'base' is not available on the salt "
                     "master",
                     "Include Declaration in SLS 'b' is not formed as a list",
                     "Include Declaration in SLS 'c': each item must be an sls name or a mapping "
                     "of one sls name to its options (key, defaults), got 5",
                     "Include Declaration in SLS 'c': each item must be an sls name or a mapping "
                     "of one sls name to its options (key, defaults), got {\"x\":1,\"y\":2}"}));
}

TEST(Sls, StrategiesAcrossFiles) {
  files f;
  f.write("base/top.sls", "base:\n  '*':\n    - one\n    - two\n");
  f.write("base/one.sls", "app: {port: 80, hosts: [a]}\nonly_one: 1\n");
  f.write("base/two.sls", "app: {tls: true, hosts: [b]}\n");
  struct row {
    std::string strategy;
    bool merge_lists;
    std::string want;
  };
  const row rows[] = {
      {"smart", false, R"({"app": {"port": 80, "tls": true, "hosts": ["b"]}, "only_one": 1})"},
      {"recurse", true,
       R"({"app": {"port": 80, "tls": true, "hosts": ["a", "b"]}, "only_one": 1})"},
      {"none", true, R"({"app": {"port": 80, "tls": true, "hosts": ["b"]}, "only_one": 1})"},
      {"overwrite", true, R"({"app": {"tls": true, "hosts": ["b"]}, "only_one": 1})"},
      {"aggregate", false, R"({"app": {"tls": true, "hosts": ["b"]}, "only_one": 1})"},
  };
  for (const auto& r : rows) {
    options o = base_only(f);
    o.merging_strategy = r.strategy;
    o.merge_lists = r.merge_lists;
    auto got = compile(o, "m", nullptr);
    EXPECT_TRUE(got.errors.empty());
    EXPECT_EQ(got.pillar, json::parse(r.want)) << r.strategy << " " << r.merge_lists;
  }
}

TEST(Sls, FilesAreReadOnceAtLoad) {
  files f;
  f.write("base/top.sls", "base:\n  '*':\n    - a\n");
  f.write("base/a.sls", "a: 1\n");
  auto c = compiler::load(base_only(f));
  f.write("base/a.sls", "a: 2\n");
  std::filesystem::remove(f.root("base/top.sls"));
  EXPECT_EQ(c.compile("m", nullptr).pillar, json::parse(R"({"a": 1})"));
  EXPECT_EQ(compiler::load(base_only(f)).compile("m", nullptr).pillar, json::object());
}

TEST(Sls, SymlinkLoopIsWalkedOnce) {
  files f;
  f.write("base/top.sls", "base:\n  '*':\n    - 'loop.*'\n");
  f.write("base/loop/x.sls", "x: 1\n");
  std::filesystem::create_directory_symlink(f.root("base/loop"), f.root("base/loop/again"));
  auto r = compile(base_only(f), "m", nullptr);
  EXPECT_EQ(r.pillar, json::parse(R"({"x": 1})"));
}

TEST(Compiler, AlikeMinionsShareOneResult) {
  files f;
  f.write("base/top.sls", "base:\n  '*':\n    - common\n  'G@os:Debian':\n    - debian\n");
  f.write("base/common.sls", "common: 1\n");
  f.write("base/debian.sls", "debian: 1\n");
  const auto c = compiler::load(base_only(f));
  json debian = {{"os", "Debian"}}, rocky = {{"os", "Rocky"}};
  auto a = c.compile_shared("web1", &debian);
  auto b = c.compile_shared("db7", &debian);
  auto other = c.compile_shared("web1", &rocky);
  EXPECT_EQ(a.get(), b.get());
  EXPECT_NE(a.get(), other.get());
  EXPECT_EQ(a->pillar, json::parse(R"({"common": 1, "debian": 1})"));
  EXPECT_EQ(other->pillar, json::parse(R"({"common": 1})"));
  EXPECT_EQ(c.compile("x", &debian).pillar, a->pillar);
}

TEST(Compiler, StateTopNamesTheTopFile) {
  files f;
  f.write("base/pillar_top.sls", "base:\n  '*':\n    - a\n");
  f.write("base/a.sls", "a: 1\n");
  options o = base_only(f);
  o.state_top = "salt://pillar_top.sls";
  EXPECT_EQ(compile(o, "m", nullptr).pillar, json::parse(R"({"a": 1})"));
}

TEST(Compiler, ConcurrentCompilesAgree) {
  files f;
  f.write("base/top.sls", R"(base:
  '*':
    - common
  'G@os:Debian and web*':
    - web
  'L@db1,db2':
    - db
)");
  f.write("base/common.sls", "include: [.shared]\ncommon: {x: 1}\n");
  f.write("base/shared.sls", "common: {y: 2}\n");
  f.write("base/web.sls", "role: web\n");
  f.write("base/db.sls", "role: db\n");
  const auto c = compiler::load(base_only(f));
  json debian = {{"os", "Debian"}};
  auto expect_for = [&](int i) {
    std::string id = i % 3 == 0 ? "web" + std::to_string(i) : i % 3 == 1 ? "db1" : "mail";
    json want = json::parse(R"({"common": {"x": 1, "y": 2}})");
    if (i % 3 == 0) want["role"] = "web";
    if (i % 3 == 1) want["role"] = "db";
    return std::pair{id, want};
  };
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = t; i < 400; i += 4) {
        auto [id, want] = expect_for(i);
        auto r = c.compile(id, &debian);
        if (r.pillar != want || !r.errors.empty()) ++bad;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
}  // namespace brine::pillar

namespace brine::pillar {
namespace {

// ---- templates: Jinja in pillar files renders for each minion

TEST(Templates, RenderWithTheMinionsGrainsAndSaltsContext) {
  files f;
  f.write("base/top.sls",
          "base:\n  '*':\n    - common\n"
          "{% if grains.get('os') == 'Debian' %}\n  'G@os:Debian':\n    - debian\n{% endif %}\n");
  f.write("base/common.sls",
          "{% from 'lib/macros.jinja' import port %}\n"
          "{% import_yaml 'lib/defaults.yaml' as defaults %}\n"
          "id: {{ grains['id'] }}\n"
          "saltenv: {{ saltenv }}\n"
          "sls: {{ sls }}\n"
          "tpldir: {{ tpldir }}\n"
          "opts_id: {{ opts.id }}\n"
          "port: {{ port(grains.get('role', 'web')) }}\n"
          "limits: {{ defaults.limits | json }}\n"
          "{% for u in ['alice', 'bob'] %}\n"
          "user_{{ u }}: {{ loop.index }}\n"
          "{% endfor %}\n");
  f.write("base/lib/macros.jinja",
          "{% macro port(role) %}{{ {'web': 80, 'db': 5432}[role] }}{% endmacro %}\n");
  f.write("base/lib/defaults.yaml", "limits: {nofile: 1024}\n");
  f.write("base/debian.sls", "apt: {proxy: none}\n");
  const options o = base_only(f);
  const compiler c = compiler::load(o);

  json debian = {{"id", "web1"}, {"os", "Debian"}};
  auto r = c.compile("web1", &debian);
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  EXPECT_EQ(r.pillar, json::parse(R"({"id": "web1", "saltenv": "base", "sls": "common",
    "tpldir": ".", "opts_id": "web1", "port": 80, "limits": {"nofile": 1024},
    "user_alice": 1, "user_bob": 2, "apt": {"proxy": "none"}})"));

  // Another minion, other grains: its own rendering (nothing shared).
  json rocky = {{"id", "db1"}, {"os", "Rocky"}, {"role", "db"}};
  r = c.compile("db1", &rocky);
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  EXPECT_EQ(r.pillar["id"], "db1");
  EXPECT_EQ(r.pillar["port"], 5432);
  EXPECT_FALSE(r.pillar.contains("apt"));
}

// A tree with templates renders them for each minion, but its plain files
// and listings are load()'s: read once, as a tree without templates is.
TEST(Templates, PlainFilesOfATemplatedTreeAreReadOnceAtLoad) {
  files f;
  f.write("base/top.sls", "base:\n  '*':\n    - plain\n    - mine\n");
  f.write("base/plain.sls", "plain: 1\n");
  f.write("base/mine.sls", "mine: {{ grains['id'] }}\n");
  auto c = compiler::load(base_only(f));
  json g1 = {{"id", "m1"}}, g2 = {{"id", "m2"}};
  EXPECT_EQ(c.compile("m1", &g1).pillar, json::parse(R"({"plain": 1, "mine": "m1"})"));
  f.write("base/plain.sls", "plain: 2\n");
  f.write("base/new.sls", "new: 1\n");
  EXPECT_EQ(c.compile("m2", &g2).pillar, json::parse(R"({"plain": 1, "mine": "m2"})"));
  EXPECT_EQ(compiler::load(base_only(f)).compile("m2", &g2).pillar,
            json::parse(R"({"plain": 2, "mine": "m2"})"));
}

TEST(Templates, IncludesAndTheSaltFunctionsTheHostGives) {
  files f;
  f.write("base/top.sls", "base:\n  '*':\n    - app\n");
  f.write("base/app/init.sls",
          "include:\n  - .{{ grains['role'] }}\n"
          "app: {{ salt['test.double'](21) }}\n");
  f.write("base/app/web.sls", "web: {{ tpldir }} {{ slsdotpath }}\n");
  options o = base_only(f);
  o.salt = [](std::string_view id, const json&) {
    render::value salt = render::value::make_dict();
    salt.dict().set(render::value("test.double"),
                  render::value::make_callable(
                      "test.double", [id = std::string(id)](render::call_args& a) {
                        return render::value(a.positional.at(0).as_int() * 2);
                      }));
    return options::minion_salt{salt, nullptr};
  };
  json grains = {{"role", "web"}};
  auto r = compile(o, "m1", &grains);
  ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  EXPECT_EQ(r.pillar, json::parse(R"({"app": 42, "web": "app app"})"));
}

TEST(Templates, ErrorsNameTheFileLineAndColumnAndLoseNothingElse) {
  files f;
  f.write("base/top.sls", "base:\n  '*':\n    - good\n    - bad\n");
  f.write("base/good.sls", "good: {{ grains.id }}\n");
  f.write("base/bad.sls", "a: 1\nb: {{ grains.nosuch }}\n");
  json grains = {{"id", "m1"}};
  auto r = compile(base_only(f), "m1", &grains);
  EXPECT_EQ(r.pillar, json::parse(R"({"good": "m1"})"));
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0], "Rendering SLS 'bad' failed, render error:\npillar file " +
                             f.root("base") +
                             "/bad.sls: template 'bad.sls' line 2 column 7: 'dict object' has "
                             "no attribute 'nosuch'");
}

// An interface giving fixed data, recording the pillar it was handed.
options::ext_function fixed(nlohmann::ordered_json data, std::vector<std::string>* seen = nullptr) {
  return [data, seen](const options::ext_call& c) {
    if (seen != nullptr) seen->push_back(std::string(c.id) + ":" + c.pillar.dump());
    if (data == "throw") throw base::error("no such table");
    return data;
  };
}

TEST(ExtPillar, MergedOverTheTopFilesDataInOrder) {
  files f;
  f.write("base/top.sls", "base:\n  '*':\n    - a\n");
  f.write("base/a.sls", "x: {from: sls, keep: 1}\nlist: [1]\n");
  options o = base_only(f);
  std::vector<std::string> seen;
  o.ext_pillars = {{"one", fixed(nlohmann::ordered_json::parse(R"({"x": {"from": "one"}, "z": 1})"), &seen)},
                   {"two", fixed(nlohmann::ordered_json::parse(R"({"z": 2, "list": [2]})"), &seen)},
                   {"bad", fixed("throw")},
                   {"listy", fixed(nlohmann::ordered_json::parse("[1]"))},
                   {"none", fixed(nullptr)}};
  o.ext_pillar = parse_ext_pillar(
      json::parse(R"([{"one": null}, {"bad": {}}, {"two": "x"}, {"listy": 1}, {"none": 1}])"),
      o.ext_pillars);
  auto r = compiler::load(o).compile("m1", nullptr);
  // Each interface's data over what came before; later wins; key order kept.
  EXPECT_EQ(r.ordered.dump(), R"({"x":{"from":"one","keep":1},"list":[2],"z":2})");
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], R"(m1:{"x":{"from":"sls","keep":1},"list":[1]})");
  EXPECT_EQ(seen[1], R"(m1:{"x":{"from":"one","keep":1},"list":[1],"z":1})");
  EXPECT_EQ(r.errors, (strings{"Failed to load ext_pillar bad: no such table",
                               "Failed to load ext_pillar listy: it gave a list, not a dictionary"}));
  // With pillar_merge_lists the lists join, as Salt's merge does.
  o.merge_lists = true;
  r = compiler::load(o).compile("m1", nullptr);
  EXPECT_EQ(r.ordered["list"].dump(), "[1,2]");
}

TEST(ExtPillar, FirstIsUnderTheSlsDataAndMatchesPillarTerms) {
  files f;
  f.write("base/top.sls", "base:\n  'I@role:web':\n    - web\n  '*':\n    - t\n");
  f.write("base/web.sls", "x: web-sls\n");
  f.write("base/t.sls", "seen: {{ pillar.get('role', 'none') }}\n");
  options o = base_only(f);
  o.ext_pillars = {{"cls", [](const options::ext_call& c) {
                      return nlohmann::ordered_json{{"role", c.id == "w1" ? "web" : "db"},
                                                    {"x", "ext"}};
                    }}};
  o.ext_pillar = parse_ext_pillar(json::parse(R"([{"cls": {}}])"), o.ext_pillars);
  o.ext_pillar_first = true;
  auto c = compiler::load(o);
  auto w = c.compile("w1", nullptr);
  EXPECT_EQ(w.ordered.dump(), R"({"role":"web","x":"web-sls","seen":"web"})");
  auto d = c.compile("d1", nullptr);
  EXPECT_EQ(d.ordered.dump(), R"({"role":"db","x":"ext","seen":"db"})");
  // Without ext_pillar_first the ext data wins and I@ sees nothing.
  o.ext_pillar_first = false;
  w = compiler::load(o).compile("w1", nullptr);
  EXPECT_EQ(w.ordered.dump(), R"({"seen":"none","role":"web","x":"ext"})");
}

TEST(ExtPillar, TheOptionIsCheckedWithTheFix) {
  std::map<std::string, options::ext_function, std::less<>> known = {{"cmd_json", fixed(nullptr)}};
  EXPECT_TRUE(parse_ext_pillar(json(), known).empty());
  auto entries = parse_ext_pillar(json::parse(R"([{"cmd_json": "echo {}"}])"), known);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].name, "cmd_json");
  EXPECT_EQ(entries[0].config, "echo {}");
  try {
    parse_ext_pillar(json::parse(R"([{"vault": {}}])"), known);
    FAIL();
  } catch (const base::error& e) {
    EXPECT_STREQ(e.what(), "ext_pillar item 1: interface 'vault' is unavailable in brine; use one of cmd_json");
  }
  EXPECT_THROW(parse_ext_pillar(json::parse(R"(["cmd_json"])"), known), base::error);
  EXPECT_THROW(parse_ext_pillar(json::parse(R"({"cmd_json": "x"})"), known), base::error);
}

}  // namespace
}  // namespace brine::pillar
