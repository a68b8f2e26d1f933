#include "target/target.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>

namespace brine::target {
namespace {

using nlohmann::json;
using ids = std::vector<std::string>;

// A master's cache in miniature: accepted ids with what is cached for them.
class fake_cache : public cache_view {
 public:
  struct entry {
    std::optional<json> grains;
    std::optional<json> pillar;
  };
  std::map<std::string, entry> minions;

  void for_each(const visitor& fn) const override {
    for (const auto& [id, e] : minions) {
      packed::document grains, pillar;
      if (e.grains) grains = packed::document(*e.grains);
      if (e.pillar) pillar = packed::document(*e.pillar);
      fn(id, {grains.root(), pillar.root()});
    }
  }
};

// Six accepted minions: db2 has nothing cached, Web3 grains but no pillar,
// mail.example.com an empty pillar.
const fake_cache& fleet() {
  static const fake_cache c = [] {
    fake_cache c;
    c.minions["web1"] = {json::parse(R"({
      "id": "web1", "os": "Debian", "os_family": "Debian", "osrelease": "12",
      "kernel": "Linux", "num_cpus": 4, "virtual": "kvm", "roles": ["web", "cache"],
      "ip_interfaces": {"eth0": ["10.0.0.11", "fe80::1"], "lo": ["127.0.0.1", "::1"]},
      "ipv4": ["10.0.0.11", "127.0.0.1"], "ipv6": ["::1", "2001:db8::11", "fe80::1"],
      "ec2_tags": {"environment": "production-eu", "team": "blue"},
      "pkgs": [{"name": "nginx", "version": "1.22"}, {"name": "redis"}],
      "selinux": {"enabled": false}, "empty": {}, "motd": "a:b",
      "deep": {"a": {"b": {"c": "d"}}}})"),
                         json::parse(R"({"role": "frontend",
      "deploy": {"tier": "gold", "regions": ["eu", "us"]}})")};
    c.minions["web2"] = {json::parse(R"({
      "id": "web2", "os": "Ubuntu", "os_family": "Debian", "osrelease": "22.04",
      "kernel": "Linux", "num_cpus": 2, "roles": ["web"],
      "ip_interfaces": {"eth0": ["10.0.1.12"]}, "ipv4": ["10.0.1.12", "127.0.0.1"],
      "ipv6": ["::1", "2001:db8:1::12"], "ec2_tags": {"environment": "staging"}})"),
                         json::parse(R"({"role": "frontend", "deploy": {"tier": "bronze"}})")};
    c.minions["db1"] = {json::parse(R"({
      "id": "db1", "os": "CentOS", "os_family": "RedHat", "osrelease": "7.9",
      "kernel": "Linux", "num_cpus": 16, "roles": ["db"],
      "ip_interfaces": {"eth0": ["192.168.1.5"]}, "ipv4": ["192.168.1.5", "127.0.0.1"],
      "ipv6": ["::1"], "selinux": {"enabled": true}})"),
                        json::parse(R"({"role": "database", "deploy": {"tier": "silver"}})")};
    c.minions["db2"] = {};
    c.minions["Web3"] = {json::parse(R"({"id": "Web3", "os": "debian",
      "os_family": "Debian", "ipv4": ["10.0.0.33"]})"),
                         std::nullopt};
    c.minions["mail.example.com"] = {
        json::parse(R"({"id": "mail.example.com", "os": "Debian", "os_family": "Debian",
      "ipv4": ["10.0.0.200"], "ipv6": [], "roles": "mail"})"),
        json::object()};
    return c;
  }();
  return c;
}

const nodegroups& groups() {
  static const nodegroups g = {
      {"debian", "G@os_family:Debian"},
      {"webs", "web* and N@debian"},
      {"dbs", std::vector<std::string>{"db1", "db2"}},
      {"dbs_str", "db1 db2"},
      {"dbs_commas", "db1,db2,"},
      {"nested", "N@webs or N@dbs"},
      {"ops_list", std::vector<std::string>{"G@os:Ubuntu", "or", "L@db1"}},
      {"precedence", "web1 or web2"},
      {"with_ghost", std::vector<std::string>{"db1", "ghost"}},
      {"loop_a", "N@loop_b or web1"},
      {"loop_b", "( N@loop_a )"},
      {"self", "N@self"},
      {"bad", "G@os:Debian and and web1"},
      {"empty", ""},
      {"unknown_ref", "N@nope"},
  };
  return g;
}

struct row {
  std::string expr;
  type kind;
  ids want;           // when `error` is empty
  std::string error;  // a substring of the message
  bool greedy = true;
  char delimiter = ':';
  std::optional<ids> missing;
};

std::ostream& operator<<(std::ostream& os, const row& r) {
  return os << type_name(r.kind) << " '" << r.expr << "'" << (r.greedy ? "" : " (not greedy)");
}

const ids k_all = {"Web3", "db1", "db2", "mail.example.com", "web1", "web2"};

const std::vector<row>& rows() {
  static const std::vector<row> r = {
      // glob: fnmatch on the id, case-sensitive
      {"*", type::glob, k_all},
      {"web*", type::glob, {"web1", "web2"}},
      {"[Ww]eb?", type::glob, {"Web3", "web1", "web2"}},
      {"web[!1]", type::glob, {"web2"}},
      {"db[1-2]", type::glob, {"db1", "db2"}},
      {"db[]1]", type::glob, {"db1"}},  // a leading ']' is a member
      {"web[1-]", type::glob, {"web1"}},
      {"*.example.com", type::glob, {"mail.example.com"}},
      {"[web1", type::glob, {}},  // '[' without ']' is literal
      {"nomatch", type::glob, {}},
      {"", type::glob, {}, "target '' (glob): empty expression"},

      // pcre: re.match on the id, anchored at the start only
      {"web\\d", type::pcre, {"web1", "web2"}},
      {"eb", type::pcre, {}},
      {".*example", type::pcre, {"mail.example.com"}},
      {"(db|Web)", type::pcre, {"Web3", "db1", "db2"}},
      {"^db1$", type::pcre, {"db1"}},
      {"\\Aweb1\\Z", type::pcre, {"web1"}},
      {"(?P<kind>db)\\d", type::pcre, {"db1", "db2"}},
      {"web(", type::pcre, {}, "target 'web(' (pcre) is not a valid regular expression"},

      // list
      {"web1,db1,ghost", type::list, {"db1", "web1"}, "", true, ':', ids{"ghost"}},
      {"web1, db1", type::list, {"db1", "web1"}, "", true, ':', ids{}},
      {"web1 db2", type::list, {"db2", "web1"}},
      {R"(["web2", "Web3"])", type::list, {"Web3", "web2"}},
      {"[web2, 'db1']", type::list, {"db1", "web2"}},
      {",", type::list, {}, "names no minion id"},
      {"[web2", type::list, {}, "never closes it"},

      // grain: glob on lowercased values; uncached minions only when greedy
      {"os:Debian", type::grain, {"Web3", "db2", "mail.example.com", "web1"}},
      {"os:Debian", type::grain, {"Web3", "mail.example.com", "web1"}, "", false},
      {"os:deb*", type::grain, {"Web3", "db2", "mail.example.com", "web1"}},
      {"roles:web", type::grain, {"db2", "web1", "web2"}},  // any list member
      {"roles:cache", type::grain, {"db2", "web1"}},
      {"roles:mail", type::grain, {"db2", "mail.example.com"}},
      {"ip_interfaces:eth0:10.0.0.*", type::grain, {"db2", "web1"}},
      {"ip_interfaces:eth0", type::grain, {"db1", "db2", "web1", "web2"}},  // a key of the dict
      {"ec2_tags:environment:*production*", type::grain, {"db2", "web1"}},
      {"*:eth0:192.168.*", type::grain, {"db1", "db2"}},          // * as the first path element
      {"ip_interfaces:*:fe80::1", type::grain, {"db2", "web1"}},  // * inside, ':' in the value
      {"deep:*:b:c:d", type::grain, {"db2", "web1"}},
      {"deep:a:b:c:D", type::grain, {"db2", "web1"}},
      {"motd:a:b", type::grain, {"db2", "web1"}},  // the delimiter inside the value
      {"num_cpus:16", type::grain, {"db1", "db2"}},
      {"num_cpus:1?", type::grain, {"db1", "db2"}},
      {"selinux:enabled:False", type::grain, {"db2", "web1"}},
      {"selinux:enabled:true", type::grain, {"db1", "db2"}},
      {"pkgs:name:redis", type::grain, {"db2", "web1"}},  // a list of dicts
      {"pkgs:0:name:nginx", type::grain, {"db2", "web1"}},
      {"pkgs:-1:name:redis", type::grain, {"db2", "web1"}},
      {"pkgs:5:name:redis", type::grain, {"db2"}},
      {"empty:*", type::grain, {"db2"}},  // an empty dict never matches
      {"os:Debian", type::grain, {"Web3", "mail.example.com", "web1"}, "", false},
      {"ec2_tags|environment|staging", type::grain, {"db2", "web2"}, "", true, '|'},
      {"os", type::grain, {}, "target 'os' (grain) has no ':' between a key and a value"},

      // grain_pcre: re.match on lowercased values
      {"os:(debian|ubuntu)", type::grain_pcre, {"Web3", "db2", "mail.example.com", "web1", "web2"}},
      {"os:Deb", type::grain_pcre, {"Web3", "db2", "mail.example.com", "web1"}},
      {"os:^cent.*$", type::grain_pcre, {"db1", "db2"}},
      {"osrelease:\\d+\\.\\d+", type::grain_pcre, {"db1", "db2", "web2"}},
      {"num_cpus:\\D", type::grain_pcre, {"db2"}},  // \D stays \D
      {"os:(", type::grain_pcre, {}, "has a bad regular expression '('"},

      // pillar and pillar_pcre: Web3 has no pillar cached, mail.example.com an empty one
      {"role:frontend", type::pillar, {"Web3", "db2", "web1", "web2"}},
      {"role:frontend", type::pillar, {"web1", "web2"}, "", false},
      {"deploy:regions:us", type::pillar, {"Web3", "db2", "web1"}},
      {"deploy:tier:G*", type::pillar, {"Web3", "db2", "web1"}},
      {"deploy:tier:(gold|silver)", type::pillar_pcre, {"Web3", "db1", "db2", "web1"}},
      {"role:data", type::pillar_pcre, {"db1"}, "", false},

      // ipcidr: the ipv4 / ipv6 grains
      {"10.0.0.0/24", type::ipcidr, {"Web3", "db2", "mail.example.com", "web1"}},
      {"10.0.0.0/24", type::ipcidr, {"Web3", "mail.example.com", "web1"}, "", false},
      {"10.0.0.11", type::ipcidr, {"db2", "web1"}},
      {"192.168.1.0/255.255.255.0", type::ipcidr, {"db1", "db2"}},
      {"2001:db8::/32", type::ipcidr, {"db2", "web1", "web2"}},
      {"2001:db8::11", type::ipcidr, {"db2", "web1"}},
      {"::1", type::ipcidr, {"db1", "db2", "web1", "web2"}},
      {"10.0.0.1/24", type::ipcidr, {}, "has host bits set (the network is 10.0.0.0/24)"},
      {"10.0.0.300", type::ipcidr, {}, "is not an IPv4 or IPv6 address or network"},
      {"10.0.0.0/33", type::ipcidr, {}, "prefix length above 32"},
      {"10.0.0.0/x", type::ipcidr, {}, "bad prefix length 'x'"},

      // nodegroup
      {"webs", type::nodegroup, {"web1", "web2"}},
      {"dbs", type::nodegroup, {"db1", "db2"}},
      {"nope",
       type::nodegroup,
       {},
       "target 'nope' (nodegroup): unknown nodegroup 'nope' at word 1"},

      // compound: operators and precedence (not > and > or)
      {"G@os:Debian and web*", type::compound, {"web1"}},
      {"web* or db*", type::compound, {"db1", "db2", "web1", "web2"}},
      {"not web*", type::compound, {"Web3", "db1", "db2", "mail.example.com"}},
      {"web* and not web2", type::compound, {"web1"}},
      {"web* not web2", type::compound, {"web1"}},  // `not` after a target: `and not`
      {"not not web1", type::compound, {"web1"}},
      {"web1 or db1 and G@os:Debian", type::compound, {"web1"}},
      {"( web1 or db1 ) and G@os:CentOS", type::compound, {"db1"}},
      {"(web1 or db1) and G@os:CentOS", type::compound, {"db1"}},  // attached parentheses
      {"((web1)) or E@(db|mail)\\d?)", type::compound, {}, "unmatched ')' at word 3"},
      {"(E@(db|xx)1) or web2", type::compound, {"db1", "web2"}},
      {"not G@os:Debian", type::compound, {"db1", "web2"}},
      {"not G@os:Debian", type::compound, {"db1", "db2", "web2"}, "", false},
      {"G@os:Debian and not L@m1,m2 or E@web\\d+",
       type::compound,
       {"Web3", "db2", "mail.example.com", "web1", "web2"}},
      {"P@os:(centos|ubuntu) and S@10.0.1.0/24", type::compound, {"db2", "web2"}},
      {"I@role:database or J@deploy:tier:^g", type::compound, {"Web3", "db1", "db2", "web1"}},
      {"I@role:database or J@deploy:tier:^g", type::compound, {"db1", "web1"}, "", false},
      {"G%@ec2_tags%environment%staging", type::compound, {"db2", "web2"}},
      {"P;@osrelease;22\\..*", type::compound, {"db2", "web2"}},
      {"I#@deploy#tier#gold", type::compound, {"Web3", "db2", "web1"}},
      {"L@web1,db1 and not web1", type::compound, {"db1"}},
      {"L@web1,ghost or db1", type::compound, {"db1", "web1"}, "", true, ':', ids{"ghost"}},
      {"not L@ghost,web1",
       type::compound,
       {"Web3", "db1", "db2", "mail.example.com", "web2"},
       "",
       true,
       ':',
       ids{}},
      {"S@2001:db8::/32 and not G@os:Ubuntu", type::compound, {"web1"}, "", false},

      // compound: nodegroups
      {"N@webs", type::compound, {"web1", "web2"}},
      {"N@nested", type::compound, {"db1", "db2", "web1", "web2"}},
      {"N@precedence and db1", type::compound, {}},  // a nodegroup is one operand
      {"N@dbs_str", type::compound, {"db1", "db2"}},
      {"N@dbs_commas", type::compound, {"db1", "db2"}},
      {"N@ops_list", type::compound, {"db1", "db2", "web2"}},
      {"not N@webs", type::compound, {"Web3", "db1", "db2", "mail.example.com"}},
      {"N@with_ghost", type::compound, {"db1"}, "", true, ':', ids{"ghost"}},
      {"N@webs or N@webs", type::compound, {"web1", "web2"}},
      {"N@loop_a",
       type::compound,
       {},
       "nodegroup 'loop_a' includes itself (loop_a -> loop_b -> loop_a) at word 2 of nodegroup "
       "'loop_b', named at word 1 of nodegroup 'loop_a', named at word 1"},
      {"web1 or N@self", type::compound, {}, "nodegroup 'self' includes itself (self -> self)"},
      {"N@nope", type::compound, {}, "unknown nodegroup 'nope' at word 1 (nodegroups: bad,"},
      {"N@bad",
       type::compound,
       {},
       "expected a target after 'and' at word 3 of nodegroup 'bad', named at word 1, got 'and'"},
      {"N@empty", type::compound, {}, "nodegroup 'empty' is empty at word 1"},
      {"web1 or N@unknown_ref",
       type::compound,
       {},
       "unknown nodegroup 'nope' at word 1 of nodegroup 'unknown_ref', named at word 3"},
      {"N@", type::compound, {}, "'N@' at word 1 has nothing after '@'"},

      // compound: malformed
      {"G@os:Debian and and L@a",
       type::compound,
       {},
       "target 'G@os:Debian and and L@a': expected a target after 'and' at word 3"},
      {"and web1", type::compound, {}, "expected a target before 'and' at word 1"},
      {"or", type::compound, {}, "expected a target before 'or' at word 1"},
      {"web1 or",
       type::compound,
       {},
       "expected a target after 'or' at word 2, at the end of the target"},
      {"not", type::compound, {}, "expected a target after 'not' at word 1"},
      {"web1 and not", type::compound, {}, "expected a target after 'not' at word 3"},
      {"( web1", type::compound, {}, "'(' at word 1 is never closed"},
      {"web1 or ( db1 and ( G@os:CentOS )", type::compound, {}, "'(' at word 3 is never closed"},
      {"web1 )", type::compound, {}, "unmatched ')' at word 2"},
      {"( and web1 )", type::compound, {}, "expected a target after '(' at word 2, got 'and'"},
      {"( )", type::compound, {}, "expected a target after '(' at word 2, got ')'"},
      {"web1 web2",
       type::compound,
       {},
       "expected 'and' or 'or' between 'web1' and 'web2' at word 2"},
      {"( web1 ) db1", type::compound, {}, "expected 'and' or 'or' between ')' and 'db1'"},
      {"", type::compound, {}, "target '': empty expression"},
      {" \t ", type::compound, {}, "empty expression"},
      {"X@foo", type::compound, {}, "'X@foo' at word 1 has an unknown target type 'X@'"},
      {"R@%foo.bar", type::compound, {}, "is a range target (R@), which brine does not support"},
      {"L%@a,b", type::compound, {}, "only G@, P@, I@ and J@ take one"},
      {"web1 or E@web(",
       type::compound,
       {},
       "'E@web(' at word 3 is not a valid regular expression"},
      {"S@10.0.0.1/24", type::compound, {}, "'S@10.0.0.1/24' at word 1 has host bits set"},
      {"S@web1", type::compound, {}, "is not an IPv4 or IPv6 address or network"},
      {"G@os", type::compound, {}, "'G@os' at word 1 has no ':' between a key and a value"},
      {"G%@os:Debian", type::compound, {}, "has no '%' between a key and a value"},
      {"P@os:(", type::compound, {}, "has a bad regular expression"},
      {"L@,", type::compound, {}, "'L@,' at word 1 names no minion id"},
  };
  return r;
}

class target_table : public testing::TestWithParam<row> {};

TEST_P(target_table, resolves) {
  const row& r = GetParam();
  if (!r.error.empty()) {
    try {
      expression::parse(r.expr, r.kind, groups(), r.delimiter);
      FAIL() << "parsed, expected an error containing: " << r.error;
    } catch (const error& e) {
      EXPECT_NE(std::string(e.what()).find(r.error), std::string::npos)
          << "message: " << e.what() << "\nwanted: " << r.error;
    }
    return;
  }
  expression e = expression::parse(r.expr, r.kind, groups(), r.delimiter);
  match_result m = match(e, fleet(), r.greedy);
  EXPECT_EQ(m.minions, r.want);
  if (r.missing) {
    EXPECT_EQ(m.missing, *r.missing);
  }
  // The same answer one minion at a time, as a minion checks its own target.
  ids one_by_one;
  fleet().for_each([&](const std::string& id, const minion_data& d) {
    if (e.matches(id, d, r.greedy)) one_by_one.push_back(id);
  });
  EXPECT_EQ(one_by_one, r.want);
}

INSTANTIATE_TEST_SUITE_P(salt, target_table, testing::ValuesIn(rows()));

// Python's fnmatch, which Salt uses for globs, on ids (case-sensitive) and on
// grain values (both sides lowercased).
TEST(target_glob, python_fnmatch_rules) {
  struct glob_case {
    const char* pattern;
    const char* text;
    bool id_match;
  };
  const glob_case cases[] = {
      {"*", "", true},
      {"a*b*c", "axxbyyc", true},
      {"a*b*c", "axxbyy", false},
      {"a*b*c*", "abcabc", true},
      {"*.example.*", "www.example.org", true},
      {"web1", "WEB1", false},
      {"h?llo", "h\xc3\xa9llo", true},  // ? is one character, not one byte
      {"[!a]b",
       "\xc3\xa9"
       "b",
       true},
      {"[\xc3\xa0-\xc3\xbf]", "\xc3\xa9", true},  // a range of non-ASCII code points
      {"[z-a]", "m", false},                      // a reversed range is empty
      {"[a-c-e]", "-", true},
      {"[a-c-e]", "d", false},
      {"[", "[", true},
      {"a\\*", "a\\bc", true},  // no escapes: a backslash is literal
      {"*/*", "a/b", true},     // * crosses '/'
      {".*", ".hidden", true},
  };
  for (const auto& c : cases) {
    auto e = expression::parse(c.pattern, type::glob);
    EXPECT_EQ(e.matches(c.text, minion_data{}, true), c.id_match) << c.pattern << " vs " << c.text;
  }
  // Grain values compare lowercased: a pattern in capitals matches.
  packed::document grains(json{{"name", "Web-01.Example.COM"}});
  EXPECT_TRUE(expression::parse("name:WEB-0[0-9].*.com", type::grain)
                  .matches("x", {grains.root(), {}}, false));
  EXPECT_TRUE(
      expression::parse("name:[A-Z]EB*", type::grain).matches("x", {grains.root(), {}}, false));
}

TEST(target_error, names_the_word) {
  try {
    expression::parse("G@os:Debian and and L@a", type::compound);
    FAIL();
  } catch (const error& e) {
    EXPECT_EQ(e.word(), 3u);
    EXPECT_STREQ(e.what(),
                 "target 'G@os:Debian and and L@a': expected a target after 'and' at word 3, "
                 "got 'and'");
  }
  try {
    expression::parse("web1 or N@bad", type::compound, groups());
    FAIL();
  } catch (const error& e) {
    EXPECT_EQ(e.word(), 3u);  // the N@ word that led to the bad nodegroup
  }
  // base::error is what daemon and CLI boundaries catch.
  EXPECT_THROW(expression::parse("(", type::compound), base::error);
}

TEST(target_types, names_round_trip) {
  for (type t : {type::glob, type::pcre, type::list, type::grain, type::grain_pcre, type::pillar,
                 type::pillar_pcre, type::ipcidr, type::nodegroup, type::compound}) {
    EXPECT_EQ(parse_type(type_name(t)), t);
  }
  EXPECT_EQ(parse_type("grain"), type::grain);
  EXPECT_EQ(parse_type("compound_pillar_exact"), std::nullopt);
  EXPECT_EQ(parse_type("Glob"), std::nullopt);
}

TEST(target_expression, reports_what_it_reads) {
  auto e = expression::parse("G@os:Debian or L@b,a or not L@c", type::compound);
  EXPECT_TRUE(e.uses_grains());
  EXPECT_FALSE(e.uses_pillar());
  EXPECT_EQ(e.listed(), (ids{"a", "b"}));
  EXPECT_EQ(e.kind(), type::compound);
  EXPECT_EQ(e.text(), "G@os:Debian or L@b,a or not L@c");
  EXPECT_TRUE(expression::parse("S@10.0.0.0/8", type::compound).uses_grains());
  EXPECT_TRUE(expression::parse("x:y", type::pillar_pcre).uses_pillar());
  EXPECT_FALSE(expression::parse("web*", type::glob).uses_grains());
}

TEST(target_expression, names_the_top_level_grains_it_reads) {
  using keys = std::optional<std::vector<std::string>>;
  EXPECT_EQ(expression::parse("G@os:Debian and G@osmajorrelease:11 and G@ip4_interfaces:eth0:10.*",
                              type::compound)
                .grain_keys(),
            (keys{{"ip4_interfaces", "os", "osmajorrelease"}}));
  EXPECT_EQ(expression::parse("S@10.0.0.0/8 or G%@os%Debian", type::compound).grain_keys(),
            (keys{{"ipv4", "ipv6", "os"}}));
  EXPECT_EQ(expression::parse("kernel:Lin.*", type::grain_pcre).grain_keys(), (keys{{"kernel"}}));
  EXPECT_EQ(expression::parse("web* and I@role:db", type::compound).grain_keys(),
            (keys{std::vector<std::string>{}}));
  EXPECT_EQ(expression::parse("G@*:Debian", type::compound).grain_keys(), std::nullopt);
  // Grains cut down to those keys match as the whole grains do.
  json grains = {{"os", "Debian"},
                 {"osmajorrelease", 11},
                 {"ip4_interfaces", {{"eth0", {"10.1.2.3"}}}},
                 {"kernel", "Linux"}};
  auto e = expression::parse("G@os:Debian and G@osmajorrelease:11 and G@ip4_interfaces:eth0:10.*",
                             type::compound);
  json cut = json::object();
  auto keys_read = e.grain_keys();
  ASSERT_TRUE(keys_read.has_value());
  for (const auto& k : *keys_read) cut[k] = grains[k];
  EXPECT_TRUE(e.matches("m", {packed::document(grains).root(), {}}, false));
  EXPECT_TRUE(e.matches("m", {packed::document(cut).root(), {}}, false));
}

TEST(target_expression, a_minion_checks_its_own_grains) {
  json grains = {{"os", "Debian"}, {"roles", {"web"}}};
  auto e = expression::parse("G@os:debian and G@roles:w*", type::compound);
  EXPECT_TRUE(e.matches("any", {packed::document(grains).root(), {}}, false));
  grains["roles"] = {"db"};
  EXPECT_FALSE(e.matches("any", {packed::document(grains).root(), {}}, false));
}

TEST(target_match, sorts_what_the_cache_gives_in_any_order) {
  struct reversed : cache_view {
    void for_each(const visitor& fn) const override {
      for (const char* id : {"c", "b", "a"}) fn(id, {});
    }
  } cache;
  auto r = match(expression::parse("L@a,c,z", type::compound), cache);
  EXPECT_EQ(r.minions, (ids{"a", "c"}));
  EXPECT_EQ(r.missing, (ids{"z"}));
}

TEST(target_nodegroups, from_master_config) {
  auto g = nodegroups_from_json(json::parse(R"({
    "group1": "L@foo,bar or bl*", "group4": ["G@foo:bar", "or", "G@foo:baz"], "ids": [1, "b"]})"));
  ASSERT_EQ(g.size(), 3u);
  EXPECT_EQ(std::get<std::string>(g.at("group1")), "L@foo,bar or bl*");
  EXPECT_EQ(std::get<std::vector<std::string>>(g.at("group4")).size(), 3u);
  EXPECT_EQ(std::get<std::vector<std::string>>(g.at("ids")), (ids{"1", "b"}));
  // Salt 2017.7: a list of one-entry maps.
  auto dashed = nodegroups_from_json(json::parse(R"([{"a": "web*"}, {"b": ["x"]}])"));
  EXPECT_EQ(dashed.size(), 2u);
  EXPECT_TRUE(nodegroups_from_json(nullptr).empty());
  EXPECT_THROW(nodegroups_from_json(json::parse(R"({"a": {"b": 1}})")), base::error);
  EXPECT_THROW(nodegroups_from_json(json::parse(R"([{"a": "x", "b": "y"}])")), base::error);
  EXPECT_THROW(nodegroups_from_json(json::parse(R"({"a": [["x"]]})")), base::error);
  EXPECT_THROW(nodegroups_from_json(json::parse(R"("web*")")), base::error);
}

}  // namespace
}  // namespace brine::target
