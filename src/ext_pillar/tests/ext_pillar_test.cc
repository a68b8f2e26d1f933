// Salt's ext_pillar interfaces (their outputs as Salt 3006's code gives
// them) and the pillar compiler's ext_pillar merge order.
#include "ext_pillar/ext_pillar.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "ext_pillar/arguments.h"
#include "http/client.h"
#include "http/server.h"
#include "support/pg_server.h"
#include "support/temp_dir.h"

namespace brine::ext_pillar {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

const auto* const k_pg_environment = ::testing::AddGlobalTestEnvironment(new test::pg_environment);

ordered_json call(const pillar::options::ext_function& fn, const ordered_json& config,
                  const std::string& id = "web1", const json& grains = json::object()) {
  packed::document g(grains);
  ordered_json pillar = ordered_json::object();
  return fn({id, g.root(), pillar, config});
}

void write(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

TEST(ExtPillarArguments, BindsAsPythonCalls) {
  std::vector<detail::parameter> params = {{"url", std::nullopt}, {"with_grains", ordered_json(false)}};
  auto a = detail::bind(ordered_json("http://x"), params);
  EXPECT_EQ(a[0], "http://x");
  EXPECT_EQ(a[1], false);
  a = detail::bind(ordered_json::parse(R"({"url": "u", "with_grains": true})"), params);
  EXPECT_EQ(a[1], true);
  a = detail::bind(ordered_json::parse(R"(["u", true])"), params);
  EXPECT_EQ(a[1], true);
  try {
    detail::bind(ordered_json::parse(R"({"with_grains": true})"), params);
    FAIL();
  } catch (const base::error& e) {
    EXPECT_STREQ(e.what(), "ext_pillar() missing 1 required positional argument: 'url'");
  }
  try {
    detail::bind(ordered_json::parse(R"({"url": "u", "bogus": 1})"), params);
    FAIL();
  } catch (const base::error& e) {
    EXPECT_STREQ(e.what(), "ext_pillar() got an unexpected keyword argument 'bogus'");
  }
  try {
    detail::bind(ordered_json::parse(R"(["u", true, 3])"), params);
    FAIL();
  } catch (const base::error& e) {
    EXPECT_STREQ(e.what(), "ext_pillar() takes from 3 to 4 positional arguments but 5 were given");
  }
}

TEST(ExtPillarCmd, JsonRunsWithoutAShellWithTheMinionId) {
  // Salt's cmd.run from another module: no shell, so the quotes are
  // shlex's and "%s" is the id.
  auto out = call(cmd_json(), ordered_json(R"(echo {"id": "%s", "n": 1})"));
  // shlex drops the double quotes: echo prints {id: web1, n: 1}, not JSON.
  EXPECT_EQ(out, ordered_json::object());
  out = call(cmd_json(), ordered_json(R"(echo '{"id": "%s", "n": [1, 2]}')"));
  EXPECT_EQ(out, ordered_json::parse(R"({"id": "web1", "n": [1, 2]})"));
  // A pipe is an argument of echo without a shell.
  out = call(cmd_json(), ordered_json(R"(echo '{}' | cat)"));
  EXPECT_EQ(out, ordered_json::object());
  EXPECT_EQ(call(cmd_json(), ordered_json("/nonexistent/classifier %s")), ordered_json::object());
}

TEST(ExtPillarCmd, YamlRunsThroughTheShell) {
  auto out = call(cmd_yaml(), ordered_json("printf 'b: 1\\na: [x, %s]\\n' | cat"));
  EXPECT_EQ(out.dump(), R"({"b":1,"a":["x","web1"]})");
  EXPECT_TRUE(call(cmd_yaml(), ordered_json("true")).is_null());
  EXPECT_EQ(call(cmd_yaml(), ordered_json("echo 'a: [unclosed'")), ordered_json::object());
}

TEST(ExtPillarFileTree, HostsAndNodegroupsAsSaltReadsThem) {
  test::temp_dir d("brine-file-tree");
  std::string root = d.path();
  write(root + "/hosts/web1/apache/port", "80\n");
  write(root + "/hosts/web1/motd", "hello\n");
  write(root + "/hosts/web1/keep/raw", "line\n");
  std::filesystem::create_directories(root + "/hosts/web1/empty");
  write(root + "/hosts/db1/motd", "other\n");
  write(root + "/nodegroups/webs/role", "web\n");
  write(root + "/nodegroups/webs/motd", "group motd\n");
  write(root + "/nodegroups/dbs/role", "db\n");
  target::nodegroups groups = target::nodegroups_from_json(
      json::parse(R"({"webs": "web*", "dbs": "L@db1", "unused": "x"})"));
  auto fn = file_tree(groups);
  auto out = call(fn, ordered_json::parse("{\"root_dir\": \"" + root + "\"}"));
  // Directories first, then files; the host's data over its nodegroups'
  // (a key keeps its first place, as in Python's dicts).
  EXPECT_EQ(out.dump(),
            R"({"motd":"hello","role":"web","apache":{"port":"80"},"empty":{},"keep":{"raw":"line"}})");
  // keep_newline globs match paths from the host directory, "./motd" for a file in it.
  out = call(fn, ordered_json::parse("{\"root_dir\": \"" + root +
                                     R"(", "keep_newline": ["keep/*", "motd"]})"));
  EXPECT_EQ(out["keep"]["raw"], "line\n");
  EXPECT_EQ(out["motd"], "hello");
  out = call(fn, ordered_json::parse("{\"root_dir\": \"" + root + R"(", "keep_newline": true})"));
  EXPECT_EQ(out["motd"], "hello\n");
  EXPECT_EQ(call(fn, ordered_json::parse("{\"root_dir\": \"" + root + "\"}"), "db1").dump(),
            R"({"role":"db","motd":"other"})");
  EXPECT_EQ(call(fn, ordered_json::parse("{\"root_dir\": \"" + root + "\"}"), "none"),
            ordered_json::object());
  EXPECT_EQ(call(fn, ordered_json::parse(R"({"root_dir": "/nonexistent"})")),
            ordered_json::object());
  EXPECT_THROW(call(fn, ordered_json::parse("{\"root_dir\": \"" + root + R"(", "template": true})")),
               base::error);
}

TEST(ExtPillarHttp, JsonAndYamlWithTheIdAndGrains) {
  std::vector<std::string> paths;
  http::server s("127.0.0.1", 0, [&paths](const http::request& r) {
    paths.emplace_back(r.path);
    if (r.path == "/json/web1") return http::response{200, "application/json", R"({"b": 1, "a": 2})"};
    if (r.path == "/json/Debian/12") return http::response{200, "application/json", R"({"os": true})"};
    if (r.path == "/yaml/web1") return http::response{200, "text/yaml", "k: [1, 2]\n"};
    if (r.path == "/bad") return http::response{200, "application/json", "not json"};
    return http::response{404, "text/plain", "no\n"};
  }, "test");
  std::string base = "http://127.0.0.1:" + std::to_string(s.port());
  ordered_json out = call(http_json(), ordered_json(base + "/json/%s"), "web1");
  EXPECT_EQ(out.dump(), R"({"b":1,"a":2})");
  out = call(http_json(), ordered_json::parse("{\"url\": \"" + base + R"(/json/%s", "namespace": "ns"})"),
             "web1");
  EXPECT_EQ(out.dump(), R"({"ns":{"b":1,"a":2}})");
  json grains = json::parse(R"({"os": "Debian", "osrelease": {"major": 12}})");
  out = call(http_json(),
             ordered_json::parse("{\"url\": \"" + base + R"(/json/<os>/<osrelease:major>", "with_grains": true})"),
             "web1", grains);
  EXPECT_EQ(out.dump(), R"({"os":true})");
  // A missing grain: Salt logs and gives nothing, without a request.
  size_t asked = paths.size();
  out = call(http_json(), ordered_json::parse("{\"url\": \"" + base + R"(/json/<nope>", "with_grains": true})"));
  EXPECT_EQ(out, ordered_json::object());
  EXPECT_EQ(paths.size(), asked);
  EXPECT_EQ(call(http_yaml(), ordered_json(base + "/yaml/%s"), "web1").dump(), R"({"k":[1,2]})");
  EXPECT_EQ(call(http_json(), ordered_json(base + "/missing")), ordered_json::object());
  EXPECT_THROW(call(http_json(), ordered_json(base + "/bad")), base::error);
  // namespace is http_json's only.
  EXPECT_THROW(call(http_yaml(), ordered_json::parse("{\"url\": \"" + base + R"(", "namespace": "x"})")),
               base::error);
}

TEST(HttpClient, RedactsCredentials) {
  EXPECT_EQ(http::redact_url("https://u:secret@h:1/p?q=a@b"), "https://<redacted>@h:1/p?q=a@b");
  EXPECT_EQ(http::redact_url("http://h/p@x"), "http://h/p@x");
  try {
    http::get("http://u:secret@127.0.0.1:" + std::to_string(test::unused_port()) + "/");
    FAIL();
  } catch (const base::error& e) {
    EXPECT_EQ(std::string(e.what()).find("secret"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("<redacted>@127.0.0.1"), std::string::npos) << e.what();
  }
}

class ExtPillarPostgres : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    pg_ = test::pg_environment::server(&why);
    if (pg_ == nullptr) {
      if (test::postgres_required()) FAIL() << why;
      GTEST_SKIP() << why;
    }
    pg_->psql(
        "DROP TABLE IF EXISTS px; CREATE TABLE px (minion text, a text, b text, c int, d text);"
        "INSERT INTO px VALUES ('web1','k1','x',1,'p'),('web1','k1','y',2,NULL),"
        "('web1','k2','x',3,'q'),('db1','k3','z',4,'r');");
    opts_ = {{"postgres",
              {{"host", pg_->socket_dir()}, {"port", pg_->port()}, {"user", "postgres"},
               {"pass", "unused"}, {"db", "postgres"}}}};
  }
  test::pg_server* pg_ = nullptr;
  json opts_;
};

TEST_F(ExtPillarPostgres, RowsBecomeNestedKeysByDepth) {
  auto fn = postgres(opts_);
  // depth 0 = as deep as the columns go: a -> b -> c -> d.
  auto out = call(fn, ordered_json::parse(
                          R"(["SELECT a, b, c, d FROM px WHERE minion = %s ORDER BY a, b"])"));
  EXPECT_EQ(out.dump(), R"({"k1":{"x":{"1":"p"},"y":{"2":null}},"k2":{"x":{"3":"q"}}})");
  // depth 1: the first column's value is the key, the others by column name.
  out = call(fn, ordered_json::parse(
                     R"({"q": {"query": "SELECT a, c, d FROM px WHERE minion = %s ORDER BY a, b", "depth": 1}})"));
  EXPECT_EQ(out.dump(), R"({"q":{"k1":{"c":2,"d":null},"k2":{"c":3,"d":"q"}}})");
  // as_list gathers repeated leaves; ignore_null keeps the earlier value.
  out = call(fn, ordered_json::parse(
                     R"({"q": {"query": "SELECT a, d FROM px WHERE minion = %s ORDER BY a, b", "as_list": true}})"));
  EXPECT_EQ(out.dump(), R"({"q":{"k1":["p",null],"k2":"q"}})");
  out = call(fn, ordered_json::parse(
                     R"({"q": {"query": "SELECT a, d FROM px WHERE minion = %s ORDER BY a, b", "ignore_null": true}})"));
  EXPECT_EQ(out.dump(), R"({"q":{"k1":"p","k2":"q"}})");
  // with_lists: column 1's mapping becomes the list of its values.
  out = call(fn, ordered_json::parse(
                     R"({"q": {"query": "SELECT a, b, d FROM px WHERE minion = %s ORDER BY a, b", "with_lists": "1"}})"));
  EXPECT_EQ(out.dump(), R"({"q":{"k1":["p",null],"k2":["q"]}})");
  // Named queries run sorted by name; a literal % is %%.
  out = call(fn, ordered_json::parse(
                     R"({"b": "SELECT a, d FROM px WHERE minion = %s AND a LIKE 'k%%' AND c = 1", "a": "SELECT a, c FROM px WHERE minion = %s AND c = 3"})"),
             "web1");
  EXPECT_EQ(out.dump(), R"({"a":{"k2":3},"b":{"k1":"p"}})");
  // A database error keeps what the earlier queries gave.
  out = call(fn, ordered_json::parse(
                     R"(["SELECT a, c FROM px WHERE minion = %s AND c = 3", "SELECT nope FROM px WHERE minion = %s"])"));
  EXPECT_EQ(out.dump(), R"({"k2":3})");
}

TEST_F(ExtPillarPostgres, ConnectionFailureNamesTheOptions) {
  json bad = opts_;
  bad["postgres"]["port"] = test::unused_port();
  try {
    call(postgres(bad), ordered_json("SELECT 1, 2 WHERE %s = 'x'"));
    FAIL();
  } catch (const base::error& e) {
    EXPECT_NE(std::string(e.what()).find("set the master's postgres:"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("unused"), std::string::npos) << "the password leaked";
  }
}

}  // namespace
}  // namespace brine::ext_pillar
