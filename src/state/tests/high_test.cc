// Table-driven cases of the compiler core on high data. Each expected value
// was worked out by hand from Salt 3006's salt/state.py (State.reconcile_extend,
// verify_high, requisite_in, apply_exclude, compile_high_data, order_chunks)
// and its key order is the order of Salt's dicts (json.dumps of the chunks).

#include <gtest/gtest.h>

#include "state/high.h"

namespace brine::state {
namespace {

json parse(const char* text) { return json::parse(text); }

struct low_case {
  const char* name;
  const char* high;
  const char* expected;  // chunks, or a list of error strings
};

const low_case k_low_cases[] = {
    {"plain state with auto order",
     R"({"vim": {"pkg": ["installed", {"order": 10000}], "__sls__": "edit", "__env__": "base"}})",
     R"([{"state": "pkg", "name": "vim", "__sls__": "edit", "__env__": "base", "__id__": "vim",
          "order": 10000, "fun": "installed"}])"},
    {"arguments kept in declaration order, name overrides in place",
     R"({"web": {"file": [{"user": "root"}, {"name": "/etc/x"}, "managed", {"mode": 644},
                          {"order": 10001}], "__sls__": "a", "__env__": "base"}})",
     R"([{"state": "file", "name": "/etc/x", "__sls__": "a", "__env__": "base", "__id__": "web",
          "user": "root", "mode": 644, "order": 10001, "fun": "managed"}])"},
    {"names: plain and with per-name arguments, name_order folded into order",
     R"({"pkgs": {"pkg": ["installed", {"names": ["b", {"a": [{"version": "1"}]}]},
                          {"order": 10000}], "__sls__": "p", "__env__": "base"}})",
     R"([{"state": "pkg", "name": "b", "__sls__": "p", "__env__": "base", "__id__": "pkgs",
          "order": 10000.0001, "fun": "installed"},
         {"state": "pkg", "name": "a", "__sls__": "p", "__env__": "base", "__id__": "pkgs",
          "order": 10000.0002, "version": "1", "fun": "installed"}])"},
    {"order: first, last, integers, negative, and the cap",
     R"({"z": {"cmd": ["run", {"order": "last"}], "__sls__": "s", "__env__": "base"},
         "y": {"cmd": ["run", {"order": 5}], "__sls__": "s", "__env__": "base"},
         "x": {"cmd": ["run", {"order": "first"}], "__sls__": "s", "__env__": "base"},
         "w": {"cmd": ["run", {"order": -1}], "__sls__": "s", "__env__": "base"},
         "v": {"cmd": ["run"], "__sls__": "s", "__env__": "base"}})",
     R"([{"state": "cmd", "name": "x", "__sls__": "s", "__env__": "base", "__id__": "x",
          "order": 0, "fun": "run"},
         {"state": "cmd", "name": "y", "__sls__": "s", "__env__": "base", "__id__": "y",
          "order": 5, "fun": "run"},
         {"state": "cmd", "name": "v", "__sls__": "s", "__env__": "base", "__id__": "v",
          "fun": "run", "order": 105},
         {"state": "cmd", "name": "w", "__sls__": "s", "__env__": "base", "__id__": "w",
          "order": 1000104, "fun": "run"},
         {"state": "cmd", "name": "z", "__sls__": "s", "__env__": "base", "__id__": "z",
          "order": 1000105, "fun": "run"}])"},
    {"equal order sorts by state, name, fun",
     R"({"b": {"pkg": ["installed", {"order": 1}], "__sls__": "s", "__env__": "base"},
         "a": {"pkg": ["installed", {"order": 1}], "__sls__": "s", "__env__": "base"},
         "c": {"file": ["managed", {"order": 1}], "__sls__": "s", "__env__": "base"}})",
     R"([{"state": "file", "name": "c", "__sls__": "s", "__env__": "base", "__id__": "c",
          "order": 1, "fun": "managed"},
         {"state": "pkg", "name": "a", "__sls__": "s", "__env__": "base", "__id__": "a",
          "order": 1, "fun": "installed"},
         {"state": "pkg", "name": "b", "__sls__": "s", "__env__": "base", "__id__": "b",
          "order": 1, "fun": "installed"}])"},
    {"require_in and watch_in become requisites of the target",
     R"({"svc": {"service": ["running", {"order": 10001}], "__sls__": "s", "__env__": "base"},
         "conf": {"file": ["managed", {"watch_in": [{"service": "svc"}]},
                           {"require_in": ["svc"]}, {"order": 10000}],
                  "__sls__": "s", "__env__": "base"}})",
     R"([{"state": "file", "name": "conf", "__sls__": "s", "__env__": "base", "__id__": "conf",
          "watch_in": [{"service": "svc"}], "require_in": ["svc"], "order": 10000,
          "fun": "managed"},
         {"state": "service", "name": "svc", "__sls__": "s", "__env__": "base",
          "__id__": "svc", "order": 10001, "watch": [{"file": "conf"}],
          "require": [{"file": "conf"}], "fun": "running"}])"},
    {"require_in by sls: every ID of that sls",
     R"({"a": {"pkg": ["installed", {"order": 1}], "__sls__": "one", "__env__": "base"},
         "b": {"pkg": ["installed", {"order": 2}], "__sls__": "one", "__env__": "base"},
         "c": {"cmd": ["run", {"require_in": [{"sls": "one"}]}, {"order": 3}],
               "__sls__": "two", "__env__": "base"}})",
     R"([{"state": "pkg", "name": "a", "__sls__": "one", "__env__": "base", "__id__": "a",
          "order": 1, "require": [{"cmd": "c"}], "fun": "installed"},
         {"state": "pkg", "name": "b", "__sls__": "one", "__env__": "base", "__id__": "b",
          "order": 2, "require": [{"cmd": "c"}], "fun": "installed"},
         {"state": "cmd", "name": "c", "__sls__": "two", "__env__": "base", "__id__": "c",
          "require_in": [{"sls": "one"}], "order": 3, "fun": "run"}])"},
    {"a second require_in entry repeats the first (Salt's hinges accumulate)",
     R"({"a": {"pkg": ["installed", {"order": 1}], "__sls__": "s", "__env__": "base"},
         "b": {"pkg": ["installed", {"order": 2}], "__sls__": "s", "__env__": "base"},
         "c": {"cmd": ["run", {"require_in": [{"pkg": "a"}, {"pkg": "b"}]}, {"order": 3}],
               "__sls__": "s", "__env__": "base"}})",
     R"([{"state": "pkg", "name": "a", "__sls__": "s", "__env__": "base", "__id__": "a",
          "order": 1, "require": [{"cmd": "c"}, {"cmd": "c"}], "fun": "installed"},
         {"state": "pkg", "name": "b", "__sls__": "s", "__env__": "base", "__id__": "b",
          "order": 2, "require": [{"cmd": "c"}], "fun": "installed"},
         {"state": "cmd", "name": "c", "__sls__": "s", "__env__": "base", "__id__": "c",
          "require_in": [{"pkg": "a"}, {"pkg": "b"}], "order": 3, "fun": "run"}])"},
    {"prereq adds prerequired to the required state",
     R"({"a": {"service": ["dead", {"prereq": [{"file": "b"}]}, {"order": 1}],
               "__sls__": "s", "__env__": "base"},
         "b": {"file": ["managed", {"order": 2}], "__sls__": "s", "__env__": "base"}})",
     R"([{"state": "service", "name": "a", "__sls__": "s", "__env__": "base", "__id__": "a",
          "prereq": [{"file": "b"}], "order": 1, "fun": "dead"},
         {"state": "file", "name": "b", "__sls__": "s", "__env__": "base", "__id__": "b",
          "order": 2, "prerequired": [{"service": "a"}], "fun": "managed"}])"},
    {"use copies the other state's arguments but its own and requisites",
     R"({"a": {"file": ["managed", {"user": "root"}, {"mode": 600}, {"require": ["x"]},
                        {"order": 1}], "__sls__": "s", "__env__": "base"},
         "b": {"file": ["managed", {"mode": 644}, {"use": [{"file": "a"}]}, {"order": 2}],
               "__sls__": "s", "__env__": "base"},
         "x": {"pkg": ["installed", {"order": 3}], "__sls__": "s", "__env__": "base"}})",
     R"([{"state": "file", "name": "a", "__sls__": "s", "__env__": "base", "__id__": "a",
          "user": "root", "mode": 600, "require": ["x"], "order": 1, "fun": "managed"},
         {"state": "file", "name": "b", "__sls__": "s", "__env__": "base", "__id__": "b",
          "mode": 644, "use": [{"file": "a"}], "order": 2, "user": "root", "fun": "managed"},
         {"state": "pkg", "name": "x", "__sls__": "s", "__env__": "base", "__id__": "x",
          "order": 3, "fun": "installed"}])"},
    {"extend replaces an argument, extends a requisite, adds new ones",
     R"({"a": {"file": ["managed", {"mode": 600}, {"require": [{"pkg": "x"}]}, {"order": 1}],
               "__sls__": "s", "__env__": "base"},
         "x": {"pkg": ["installed", {"order": 2}], "__sls__": "s", "__env__": "base"},
         "__extend__": [{"a": {"file": [{"mode": 644}, {"require": [{"pkg": "y"}]},
                                       {"user": "bob"}],
                               "__sls__": "t", "__env__": "base"}}]})",
     R"([{"state": "file", "name": "a", "__sls__": "s", "__env__": "base", "__id__": "a",
          "mode": 644, "require": [{"pkg": "x"}, {"pkg": "y"}], "order": 1, "user": "bob",
          "fun": "managed"},
         {"state": "pkg", "name": "x", "__sls__": "s", "__env__": "base", "__id__": "x",
          "order": 2, "fun": "installed"}])"},
    {"extend by name finds the ID",
     R"({"a": {"file": ["managed", {"name": "/etc/a"}, {"order": 1}],
               "__sls__": "s", "__env__": "base"},
         "__extend__": [{"/etc/a": {"file": [{"mode": 644}], "__sls__": "t",
                                    "__env__": "base"}}]})",
     R"([{"state": "file", "name": "/etc/a", "__sls__": "s", "__env__": "base", "__id__": "a",
          "order": 1, "mode": 644, "fun": "managed"}])"},
    {"exclude by sls glob and by id",
     R"({"a": {"pkg": ["installed", {"order": 1}], "__sls__": "web.one", "__env__": "base"},
         "b": {"pkg": ["installed", {"order": 2}], "__sls__": "db", "__env__": "base"},
         "c": {"pkg": ["installed", {"order": 3}], "__sls__": "db", "__env__": "base"},
         "__exclude__": [{"sls": "web.*"}, {"id": "c"}]})",
     R"([{"state": "pkg", "name": "b", "__sls__": "db", "__env__": "base", "__id__": "b",
          "order": 2, "fun": "installed"}])"},
    {"a trailing colon and a missing function are verify_high errors",
     R"({"a": {"pkg": null, "__sls__": "s", "__env__": "base"},
         "b": {"pkg": [{"order": 1}], "__sls__": "s", "__env__": "base"},
         "c": {"pkg": ["installed", "removed"], "__sls__": "s", "__env__": "base"}})",
     R"(["ID 'a' in SLS 's' contains a short declaration (pkg) with a trailing colon. When not passing any arguments to a state, the colon must be omitted.",
         "No function declared in state 'b' in SLS 's'",
         "Too many functions declared in state 'c' in SLS 's'. Please choose one of the following: installed, removed"])"},
    {"a requisite that is not a list",
     R"({"a": {"pkg": ["installed", {"require": "b"}], "__sls__": "s", "__env__": "base"}})",
     R"(["The require statement in state 'a' in SLS 's' needs to be formed as a list"])"},
    {"mutual requires are a recursive requisite",
     R"({"a": {"pkg": ["installed", {"require": [{"pkg": "b"}]}], "__sls__": "s",
               "__env__": "base"},
         "b": {"pkg": ["installed", {"require": [{"pkg": "a"}]}], "__sls__": "s",
               "__env__": "base"}})",
     R"(["A recursive requisite was found, SLS \"s\" ID \"b\" ID \"a\""])"},
    {"extending an unknown ID",
     R"({"a": {"pkg": ["installed"], "__sls__": "s", "__env__": "base"},
         "__extend__": [{"nope": {"file": [{"mode": 1}], "__sls__": "t", "__env__": "dev"}}]})",
     R"(["Cannot extend ID 'nope' in 'dev:t'. It is not part of the high state.\nThis is likely due to a missing include statement or an incorrectly typed ID.\nEnsure that a state with an ID of 'nope' is available\nin environment 'dev' and to SLS 't'"])"},
    {"a dotted requisite type",
     R"({"a": {"pkg": ["installed", {"require": [{"pkg.installed": "b"}]}], "__sls__": "s",
               "__env__": "base"},
         "b": {"pkg": ["installed"], "__sls__": "s", "__env__": "base"}})",
     R"(["Invalid requisite type 'pkg.installed' in state 'a', in SLS 's'. Requisite types must not contain dots, did you mean 'pkg'?"])"},
    {"a dotted state in a requisite_in, as a dict and as a list",
     R"({"a": {"pkg": ["installed", {"require_in": {"pkg.installed": "b"}}], "__sls__": "s",
               "__env__": "base"},
         "c": {"pkg": ["installed", {"watch_in": [{"pkg.removed": "b"}]}], "__sls__": "t",
               "__env__": "base"},
         "b": {"pkg": ["installed"], "__sls__": "s", "__env__": "base"}})",
     R"(["Invalid requisite in require: pkg.installed for b, in SLS 's'. Requisites must not contain dots, did you mean 'pkg'?",
         "Invalid requisite in watch: pkg.removed for b, in SLS 't'. Requisites must not contain dots, did you mean 'pkg'?"])"},
};

TEST(CompileLow, Cases) {
  for (const auto& c : k_low_cases) {
    SCOPED_TRACE(c.name);
    auto r = compile_low(parse(c.high));
    json expected = parse(c.expected);
    json got = r.errs.empty() ? r.chunks : json(r.errs);
    EXPECT_EQ(got.dump(1), expected.dump(1));
  }
}

TEST(CompileLow, NameOrderStaysWithoutAnOrder) {
  // order_chunks gives a chunk without `order` the cap and goes on: its
  // name_order is left in (Salt's `continue`).
  auto r = compile_low(parse(
      R"({"p": {"pkg": ["installed", {"names": ["a"]}], "__sls__": "s", "__env__": "base"}})"));
  ASSERT_TRUE(r.errs.empty());
  EXPECT_EQ(r.chunks.dump(),
            R"([{"state":"pkg","name":"a","__sls__":"s","__env__":"base","__id__":"p","name_order":1,"fun":"installed","order":1}])");
}

TEST(RenderSteps, StateDeclsExtendExcludeIorder) {
  json state = parse(R"({"extend": {"x": {"file.managed": [{"mode": 1}]}},
                         "exclude": [{"id": "q"}],
                         "a": "pkg.installed",
                         "b": {"file.managed": [{"name": "/b"}], "cmd": ["run", {"order": 3}]}})");
  errors errs;
  handle_extend(state, "s", "base", errs);
  handle_exclude(state, "s", "base", errs);
  handle_state_decls(state, "s", "base", errs);
  int next = 10000;
  handle_iorder(state, next);
  EXPECT_TRUE(errs.empty());
  EXPECT_EQ(state.dump(),
            R"({"a":{"__sls__":"s","__env__":"base","pkg":["installed",{"order":10000}]},)"
            R"("b":{"cmd":["run",{"order":3}],"file":[{"name":"/b"},"managed",{"order":10001}],)"
            R"("__sls__":"s","__env__":"base"},)"
            R"("__extend__":[{"x":{"__sls__":"s","__env__":"base","file":[{"mode":1},"managed"]}}],)"
            R"("__exclude__":[{"id":"q"}]})");
  EXPECT_EQ(next, 10002);
}

TEST(RenderSteps, ConflictingIds) {
  json high = parse(R"({"a": {"pkg": ["installed"], "__sls__": "one", "__env__": "base"}})");
  json state = parse(R"({"a": {"pkg": ["removed"], "__sls__": "two", "__env__": "base"}})");
  errors errs;
  merge_included_states(high, state, errs);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0],
            "Detected conflicting IDs, SLS IDs need to be globally unique.\n    The conflicting "
            "ID is 'a' and is found in SLS 'base:one' and SLS 'base:two'");
}

}  // namespace
}  // namespace brine::state
