// The postgres states and execution functions against a real PostgreSQL
// server on loopback (tests/support/pg_server.h): skipped when PostgreSQL
// is not installed, unless BRINE_REQUIRE_POSTGRES=1.

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <filesystem>
#include <string>
#include <thread>

#include "modules/context.h"
#include "modules/postgres.h"
#include "modules/registry.h"
#include "states/registry.h"
#include "support/pg_server.h"

namespace brine::states {
namespace {

const auto* const k_pg_environment = ::testing::AddGlobalTestEnvironment(new test::pg_environment);

class fake_context : public modules::minion_context {
 public:
  explicit fake_context(const modules::registry& reg) : reg_(reg) {}
  const std::string& id() const override { return id_; }
  std::shared_ptr<const nlohmann::json> grains() const override {
    return std::make_shared<nlohmann::json>(nlohmann::json{{"id", id_}});
  }
  std::shared_ptr<const nlohmann::json> pillar() const override {
    return std::make_shared<nlohmann::json>(pillar_);
  }
  const nlohmann::json& opts() const override { return opts_; }
  std::string grains_file() const override { return ""; }
  const modules::registry& functions() const override { return reg_; }
  void refresh_grains() override {}
  bool refresh_pillar(std::string&) override { return false; }
  std::vector<modules::running_job> running() const override { return {}; }
  bool kill_job(const std::string&) override { return false; }
  nlohmann::json opts_ = nlohmann::json::object();
  nlohmann::json pillar_ = nlohmann::json::object();

 private:
  const modules::registry& reg_;
  std::string id_ = "m1";
};

class postgres_states : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    pg_ = test::pg_environment::server(&why);
    if (pg_ == nullptr) {
      if (test::postgres_required()) {
        FAIL() << why << " (BRINE_REQUIRE_POSTGRES=1 makes this a failure)";
      }
      GTEST_SKIP() << why;
    }
    register_builtin_states(states_);
    modules::register_builtin_modules(functions_);
  }

  // The superuser over the server's socket (trust), as state arguments.
  json conn() const {
    return {{"db_host", pg_->socket_dir()}, {"db_port", pg_->port()}, {"db_user", "postgres"}};
  }

  // A low chunk: `args` plus the connection.
  json low(json args) const {
    json out = conn();
    for (auto& [k, v] : args.items()) out[k] = v;
    return out;
  }

  json call(const std::string& fun, json low_chunk, bool test = false) {
    const registry::entry* e = states_.find(fun);
    EXPECT_NE(e, nullptr) << fun;
    if (e == nullptr) return json();
    state_call c;
    c.low = std::move(low_chunk);
    c.test = test;
    c.functions = &functions_;
    c.context = &context_;
    asio::io_context io;
    json out;
    asio::co_spawn(io, e->fn(std::move(c)), [&](std::exception_ptr ex, json r) {
      if (ex) std::rethrow_exception(ex);
      out = std::move(r);
    });
    io.run();
    return out;
  }

  modules::outcome run(const std::string& fun, nlohmann::json args, nlohmann::json kwargs,
                       std::chrono::seconds timeout = std::chrono::seconds(60)) {
    modules::call c;
    c.fun = fun;
    c.args = std::move(args);
    c.kwargs = std::move(kwargs);
    c.context = &context_;
    c.timeout = timeout;
    asio::io_context io;
    modules::outcome out;
    asio::co_spawn(io, modules::execute(functions_, std::move(c)),
                   [&](std::exception_ptr ex, modules::outcome o) {
                     if (ex) std::rethrow_exception(ex);
                     out = std::move(o);
                   });
    io.run();
    return out;
  }

  std::string sql(const std::string& query, const std::string& db = "postgres") {
    return pg_->psql(query, db);
  }

  test::pg_server* pg_ = nullptr;
  registry states_;
  modules::registry functions_;
  fake_context context_{functions_};
};

TEST_F(postgres_states, user_present_creates_then_is_already_present) {
  sql("DROP ROLE IF EXISTS alice; DROP ROLE IF EXISTS bob");
  json r = call("postgres_user.present", low({{"name", "alice"}, {"createdb", true}}));
  EXPECT_EQ(r["result"], true) << r.dump();
  EXPECT_EQ(r["comment"], "The user alice has been created");
  EXPECT_EQ(r["changes"], json({{"alice", "Present"}}));
  EXPECT_EQ(
      sql("SELECT rolcreatedb, rolcanlogin, rolinherit FROM pg_roles WHERE rolname = 'alice'"),
      "t|t|t");

  json again = call("postgres_user.present", low({{"name", "alice"}, {"createdb", true}}));
  EXPECT_EQ(again["result"], true);
  EXPECT_EQ(again["comment"], "User alice is already present");
  EXPECT_EQ(again["changes"], json::object());

  json would = call("postgres_user.present", low({{"name", "bob"}}), true);
  EXPECT_TRUE(would["result"].is_null());
  EXPECT_EQ(would["comment"], "User bob is set to be created");
  EXPECT_EQ(would["changes"], json::object());
  EXPECT_EQ(sql("SELECT count(*) FROM pg_roles WHERE rolname = 'bob'"), "0");
  sql("DROP ROLE alice");
}

TEST_F(postgres_states, user_attribute_change_is_an_update_and_test_says_so) {
  sql("DROP ROLE IF EXISTS carol; CREATE ROLE carol LOGIN");
  json would = call("postgres_user.present",
                    low({{"name", "carol"}, {"createdb", true}, {"login", true}}), true);
  EXPECT_TRUE(would["result"].is_null());
  EXPECT_EQ(would["comment"], "User carol is set to be updated");
  EXPECT_EQ(would["changes"], json({{"carol", {{"createdb", true}}}}));
  EXPECT_EQ(sql("SELECT rolcreatedb FROM pg_roles WHERE rolname = 'carol'"), "f");

  json r = call("postgres_user.present", low({{"name", "carol"}, {"createdb", true}}));
  EXPECT_EQ(r["result"], true) << r.dump();
  EXPECT_EQ(r["comment"], "The user carol has been updated");
  EXPECT_EQ(r["changes"], json({{"carol", {{"createdb", true}}}}));
  EXPECT_EQ(sql("SELECT rolcreatedb FROM pg_roles WHERE rolname = 'carol'"), "t");

  sql("DROP ROLE IF EXISTS staff; CREATE ROLE staff NOLOGIN");
  json g = call("postgres_user.present", low({{"name", "carol"}, {"groups", "staff"}}));
  EXPECT_EQ(g["changes"], json({{"carol", {{"groups", {"staff"}}}}})) << g.dump();
  EXPECT_EQ(sql("SELECT count(*) FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.roleid "
                "JOIN pg_roles u ON u.oid = m.member WHERE r.rolname = 'staff' AND u.rolname = "
                "'carol'"),
            "1");
  json g2 = call("postgres_user.present", low({{"name", "carol"}, {"groups", "staff"}}));
  EXPECT_EQ(g2["changes"], json::object());

  json until = call("postgres_user.present",
                    low({{"name", "carol"}, {"valid_until", "2099-01-02 03:04:05"}}));
  EXPECT_EQ(until["changes"], json({{"carol", {{"valid_until", "2099-01-02 03:04:05"}}}}));
  json until2 = call("postgres_user.present",
                     low({{"name", "carol"}, {"valid_until", "2099-01-02 03:04:05"}}));
  EXPECT_EQ(until2["changes"], json::object()) << until2.dump();
  sql("DROP ROLE carol; DROP ROLE staff");
}

TEST_F(postgres_states, password_is_set_compared_and_never_shown) {
  sql("DROP ROLE IF EXISTS dave");
  const std::string first = "Fi'rst-pass\"word";
  const std::string second = "second-secret-42";
  json args = {{"name", "dave"}, {"password", first}, {"encrypted", "scram-sha-256"}};
  json r = call("postgres_user.present", low(args));
  EXPECT_EQ(r["comment"], "The user dave has been created") << r.dump();
  EXPECT_EQ(r.dump().find("pass\\\"word"), std::string::npos);

  // The new role logs in over TCP (scram-sha-256) with that password.
  modules::outcome login =
      run("postgres.version", nlohmann::json::array(),
          {{"host", "127.0.0.1"}, {"port", pg_->port()}, {"user", "dave"}, {"password", first}});
  EXPECT_TRUE(login.success) << login.ret.dump();
  EXPECT_EQ(login.ret.get<std::string>().substr(0, 2), "15");

  json same = call("postgres_user.present", low(args));
  EXPECT_EQ(same["comment"], "User dave is already present") << same.dump();
  EXPECT_EQ(same["changes"], json::object());

  args["password"] = second;
  json would = call("postgres_user.present", low(args), true);
  EXPECT_TRUE(would["result"].is_null());
  EXPECT_EQ(would["changes"], json({{"dave", {{"password", true}}}}));
  json changed = call("postgres_user.present", low(args));
  EXPECT_EQ(changed["comment"], "The user dave has been updated");
  EXPECT_EQ(changed["changes"], json({{"dave", {{"password", true}}}}));
  EXPECT_EQ(changed.dump().find(second), std::string::npos);
  modules::outcome old =
      run("postgres.version", nlohmann::json::array(),
          {{"host", "127.0.0.1"}, {"port", pg_->port()}, {"user", "dave"}, {"password", first}});
  EXPECT_FALSE(old.success);
  EXPECT_NE(old.ret.get<std::string>().find("password authentication failed"), std::string::npos)
      << old.ret.dump();
  EXPECT_EQ(old.ret.get<std::string>().find(first), std::string::npos);
  modules::outcome now =
      run("postgres.version", nlohmann::json::array(),
          {{"host", "127.0.0.1"}, {"port", pg_->port()}, {"user", "dave"}, {"password", second}});
  EXPECT_TRUE(now.success) << now.ret.dump();

  // Salt 3006's default: md5 of password + role.
  json md5 = call("postgres_user.present", low({{"name", "dave"}, {"password", "abc"}}));
  EXPECT_EQ(md5["changes"], json({{"dave", {{"password", true}}}}));
  EXPECT_EQ(sql("SELECT rolpassword FROM pg_authid WHERE rolname = 'dave'"),
            modules::postgres::maybe_encrypt_password("dave", "abc", "md5"));
  EXPECT_EQ(modules::postgres::maybe_encrypt_password("dave", "abc", "md5"),
            "md5" + sql("SELECT md5('abcdave')"));
  json md5_again = call("postgres_user.present", low({{"name", "dave"}, {"password", "abc"}}));
  EXPECT_EQ(md5_again["changes"], json::object());
  sql("DROP ROLE dave");
}

TEST_F(postgres_states, user_absent_removes_then_says_not_present) {
  sql("DROP ROLE IF EXISTS erin; CREATE ROLE erin");
  json would = call("postgres_user.absent", low({{"name", "erin"}}), true);
  EXPECT_TRUE(would["result"].is_null());
  EXPECT_EQ(would["comment"], "User erin is set to be removed");
  json r = call("postgres_user.absent", low({{"name", "erin"}}));
  EXPECT_EQ(r["result"], true);
  EXPECT_EQ(r["comment"], "User erin has been removed");
  EXPECT_EQ(r["changes"], json({{"erin", "Absent"}}));
  EXPECT_EQ(sql("SELECT count(*) FROM pg_roles WHERE rolname = 'erin'"), "0");
  json again = call("postgres_user.absent", low({{"name", "erin"}}));
  EXPECT_EQ(again["comment"], "User erin is not present, so it cannot be removed");
  EXPECT_EQ(again["changes"], json::object());
}

TEST_F(postgres_states, names_are_quoted_not_pasted) {
  const std::string odd = "we\"ird'; DROP ROLE postgres; --";
  json r = call("postgres_user.present", low({{"name", odd}, {"password", "x'y"}}));
  EXPECT_EQ(r["result"], true) << r.dump();
  EXPECT_EQ(
      sql("SELECT count(*) FROM pg_roles WHERE rolname = 'we\"ird''; DROP ROLE postgres; --'"),
      "1");
  json db = call("postgres_database.present", low({{"name", odd}, {"owner", odd}}));
  EXPECT_EQ(db["result"], true) << db.dump();
  EXPECT_EQ(call("postgres_database.absent", low({{"name", odd}}))["result"], true);
  json gone = call("postgres_user.absent", low({{"name", odd}}));
  EXPECT_EQ(gone["changes"], json({{odd, "Absent"}}));
  EXPECT_EQ(sql("SELECT count(*) FROM pg_roles WHERE rolname = 'postgres'"), "1");
}

TEST_F(postgres_states, database_present_owner_change_and_absent) {
  sql("DROP DATABASE IF EXISTS appdb");
  sql("DROP ROLE IF EXISTS app1; DROP ROLE IF EXISTS app2; CREATE ROLE app1; CREATE ROLE app2");
  json would = call("postgres_database.present", low({{"name", "appdb"}, {"owner", "app1"}}), true);
  EXPECT_TRUE(would["result"].is_null());
  EXPECT_EQ(would["comment"], "Database appdb is set to be created");

  json r = call(
      "postgres_database.present",
      low({{"name", "appdb"}, {"owner", "app1"}, {"encoding", "UTF8"}, {"template", "template0"}}));
  EXPECT_EQ(r["result"], true) << r.dump();
  EXPECT_EQ(r["comment"], "The database appdb has been created");
  EXPECT_EQ(r["changes"], json({{"appdb", "Present"}}));
  EXPECT_EQ(sql("SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = 'appdb'"), "app1");

  json again = call("postgres_database.present",
                    low({{"name", "appdb"}, {"owner", "app1"}, {"encoding", "utf8"}}));
  EXPECT_EQ(again["comment"], "Database appdb is already present");
  EXPECT_EQ(again["changes"], json::object());

  json owner_would =
      call("postgres_database.present", low({{"name", "appdb"}, {"owner", "app2"}}), true);
  EXPECT_TRUE(owner_would["result"].is_null());
  EXPECT_EQ(owner_would["comment"], "Database appdb exists, but parameters need to be changed");
  json owner = call("postgres_database.present", low({{"name", "appdb"}, {"owner", "app2"}}));
  EXPECT_EQ(owner["comment"], "Parameters for database appdb have been changed");
  EXPECT_EQ(owner["changes"], json({{"appdb", "Parameters changed"}}));
  EXPECT_EQ(sql("SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = 'appdb'"), "app2");

  // owner_recurse: what is in the database changes owner too.
  sql("CREATE TABLE t (i serial); ALTER TABLE t OWNER TO app2; CREATE SEQUENCE s OWNED BY NONE; "
      "ALTER SEQUENCE s OWNER TO app2",
      "appdb");
  json recurse = call("postgres_database.present",
                      low({{"name", "appdb"}, {"owner", "app1"}, {"owner_recurse", true}}));
  EXPECT_EQ(recurse["result"], true) << recurse.dump();
  EXPECT_EQ(sql("SELECT string_agg(relname || '=' || pg_get_userbyid(relowner), ',' ORDER BY "
                "relname) FROM pg_class WHERE relname IN ('t', 't_i_seq', 's')",
                "appdb"),
            "s=app1,t=app1,t_i_seq=app1");

  json wrong = call("postgres_database.present", low({{"name", "appdb"}, {"encoding", "LATIN1"}}));
  EXPECT_EQ(wrong["result"], false);
  EXPECT_EQ(wrong["comment"],
            "Database appdb has wrong parameters which couldn't be changed on fly.");

  json gone_would = call("postgres_database.absent", low({{"name", "appdb"}}), true);
  EXPECT_TRUE(gone_would["result"].is_null());
  EXPECT_EQ(gone_would["comment"], "Database appdb is set to be removed");
  json gone = call("postgres_database.absent", low({{"name", "appdb"}}));
  EXPECT_EQ(gone["comment"], "Database appdb has been removed");
  EXPECT_EQ(gone["changes"], json({{"appdb", "Absent"}}));
  json gone2 = call("postgres_database.absent", low({{"name", "appdb"}}));
  EXPECT_EQ(gone2["comment"], "Database appdb is not present, so it cannot be removed");
  sql("DROP ROLE app1; DROP ROLE app2");
}

TEST_F(postgres_states, database_create_failure_says_why) {
  json r = call("postgres_database.present", low({{"name", "nodb"}, {"owner", "no_such_role"}}));
  EXPECT_EQ(r["result"], false);
  EXPECT_NE(r["comment"].get<std::string>().find("role \"no_such_role\" does not exist"),
            std::string::npos)
      << r.dump();
}

TEST_F(postgres_states, schema_present_and_absent) {
  sql("DROP DATABASE IF EXISTS schemadb");
  sql("CREATE DATABASE schemadb");
  sql("DROP ROLE IF EXISTS sowner; CREATE ROLE sowner");
  json args = conn();
  args["dbname"] = "schemadb";
  args["name"] = "app";
  args["owner"] = "sowner";
  json would = call("postgres_schema.present", args, true);
  EXPECT_TRUE(would["result"].is_null());
  EXPECT_EQ(would["comment"], "Schema app is set to be created in database schemadb.");
  json r = call("postgres_schema.present", args);
  EXPECT_EQ(r["comment"], "Schema app has been created in database schemadb") << r.dump();
  EXPECT_EQ(r["changes"], json({{"app", "Present"}}));
  EXPECT_EQ(r["dbname"], "schemadb");
  EXPECT_EQ(r.begin().key(), "dbname");  // Salt's key order
  EXPECT_EQ(
      sql("SELECT pg_get_userbyid(nspowner) FROM pg_namespace WHERE nspname = 'app'", "schemadb"),
      "sowner");
  json again = call("postgres_schema.present", args);
  EXPECT_EQ(again["comment"], "Schema app already exists in database schemadb");
  EXPECT_EQ(again["changes"], json::object());

  args.erase("owner");
  json rm_would = call("postgres_schema.absent", args, true);
  EXPECT_EQ(rm_would["comment"], "Schema app is set to be removed from database schemadb");
  json rm = call("postgres_schema.absent", args);
  EXPECT_EQ(rm["comment"], "Schema app has been removed from database schemadb");
  EXPECT_EQ(rm["changes"], json({{"app", "Absent"}}));
  json rm2 = call("postgres_schema.absent", args);
  EXPECT_EQ(rm2["comment"],
            "Schema app is not present in database schemadb, so it cannot be removed");
  sql("DROP DATABASE schemadb");
  // No database, no schema (Salt's query answers no rows).
  json no_db = call("postgres_schema.absent", args);
  EXPECT_EQ(no_db["result"], true) << no_db.dump();
  EXPECT_EQ(no_db["comment"],
            "Schema app is not present in database schemadb, so it cannot be removed");
  sql("DROP ROLE sowner");
}

TEST_F(postgres_states, extension_present_upgrade_and_absent) {
  namespace fs = std::filesystem;
  if (sql("SELECT count(*) FROM pg_available_extensions WHERE name = 'hstore'") != "1") {
    GTEST_SKIP() << "the extension hstore is not installed with this PostgreSQL";
  }
  sql("DROP DATABASE IF EXISTS extdb");
  sql("CREATE DATABASE extdb");
  json base = conn();
  base["maintenance_db"] = "extdb";
  base["name"] = "hstore";
  json older = base;
  older["ext_version"] = "1.7";
  json would = call("postgres_extension.present", older, true);
  EXPECT_TRUE(would["result"].is_null());
  EXPECT_EQ(would["comment"], "Extension hstore is set to be installed");
  json r = call("postgres_extension.present", older);
  EXPECT_EQ(r["comment"], "The extension hstore has been installed") << r.dump();
  EXPECT_EQ(r["changes"], json({{"hstore", "Installed"}}));
  EXPECT_EQ(sql("SELECT extversion FROM pg_extension WHERE extname = 'hstore'", "extdb"), "1.7");
  json again = call("postgres_extension.present", older);
  EXPECT_EQ(again["comment"], "Extension hstore is already present");
  EXPECT_EQ(again["changes"], json::object());

  json newer = base;
  newer["ext_version"] = "1.8";
  json up_would = call("postgres_extension.present", newer, true);
  EXPECT_EQ(up_would["comment"], "Extension hstore is set to be upgraded");
  json up = call("postgres_extension.present", newer);
  EXPECT_EQ(up["comment"], "The extension hstore has been upgraded") << up.dump();
  EXPECT_EQ(up["changes"], json({{"hstore", "Upgraded"}}));
  EXPECT_EQ(sql("SELECT extversion FROM pg_extension WHERE extname = 'hstore'", "extdb"), "1.8");

  json rm_would = call("postgres_extension.absent", base, true);
  EXPECT_EQ(rm_would["comment"], "Extension hstore is set to be removed");
  json rm = call("postgres_extension.absent", base);
  EXPECT_EQ(rm["comment"], "Extension hstore has been removed");
  EXPECT_EQ(rm["changes"], json({{"hstore", "Absent"}}));
  json rm2 = call("postgres_extension.absent", base);
  EXPECT_EQ(rm2["comment"], "Extension hstore is not present, so it cannot be removed");
  sql("DROP DATABASE extdb");
}

TEST_F(postgres_states, bad_connection_names_the_server_and_the_fix) {
  const int port = test::unused_port();
  json r = call(
      "postgres_user.present",
      {{"name", "x"}, {"db_host", "127.0.0.1"}, {"db_port", port}, {"db_password", "hunter2"}});
  EXPECT_EQ(r["result"], false);
  const std::string comment = r["comment"];
  EXPECT_NE(comment.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << comment;
  EXPECT_NE(comment.find("check postgres.host and postgres.port"), std::string::npos) << comment;
  EXPECT_EQ(comment.find("hunter2"), std::string::npos);

  json pw = call("postgres_database.absent", {{"name", "x"},
                                              {"db_host", "127.0.0.1"},
                                              {"db_port", pg_->port()},
                                              {"db_user", "brine"},
                                              {"db_password", "wrong-password"}});
  EXPECT_EQ(pw["result"], false);
  const std::string why = pw["comment"];
  EXPECT_NE(why.find("password authentication failed"), std::string::npos) << why;
  EXPECT_NE(why.find("postgres.pass"), std::string::npos) << why;
  EXPECT_EQ(why.find("wrong-password"), std::string::npos);
}

TEST_F(postgres_states, connection_options_come_from_config_then_pillar) {
  sql("DROP ROLE IF EXISTS frank; CREATE ROLE frank");
  context_.opts_ = {{"postgres.host", "127.0.0.1"},
                    {"postgres.port", pg_->port()},
                    {"postgres.user", "brine"},
                    {"postgres.pass", pg_->password()}};
  modules::outcome o = run("postgres.user_exists", {"frank"}, nlohmann::json::object());
  EXPECT_TRUE(o.success) << o.ret.dump();
  EXPECT_EQ(o.ret, true);
  // An argument wins over the option.
  modules::outcome bad = run("postgres.user_exists", {"frank"}, {{"port", test::unused_port()}});
  EXPECT_FALSE(bad.success);

  context_.opts_ = nlohmann::json::object();
  context_.pillar_ = {{"postgres.host", "127.0.0.1"},
                      {"postgres.port", std::to_string(pg_->port())},
                      {"postgres.user", "brine"},
                      {"postgres.pass", pg_->password()}};
  json r = call("postgres_user.absent", {{"name", "nobody-here"}});
  EXPECT_EQ(r["result"], true) << r.dump();
  EXPECT_EQ(r["comment"], "User nobody-here is not present, so it cannot be removed");
  context_.pillar_ = nlohmann::json::object();
  sql("DROP ROLE frank");
}

TEST_F(postgres_states, execution_functions_answer_salts_shapes) {
  json c = {{"host", pg_->socket_dir()}, {"port", pg_->port()}, {"user", "postgres"}};
  modules::outcome q = run("postgres.psql_query", {"SELECT 1 AS one, NULL AS two;"}, c);
  ASSERT_TRUE(q.success) << q.ret.dump();
  EXPECT_EQ(q.ret, nlohmann::json::parse(R"([{"one": "1", "two": ""}])"));
  modules::outcome dbs = run("postgres.db_list", nlohmann::json::array(), c);
  ASSERT_TRUE(dbs.success);
  EXPECT_EQ(dbs.ret["postgres"]["Owner"], "postgres");
  EXPECT_EQ(dbs.ret["postgres"]["Encoding"], "UTF8");
  modules::outcome users = run("postgres.user_list", nlohmann::json::array(), c);
  ASSERT_TRUE(users.success);
  EXPECT_EQ(users.ret["postgres"]["superuser"], true);
  EXPECT_EQ(users.ret["postgres"]["groups"], nlohmann::json::array());
  EXPECT_FALSE(users.ret["postgres"].contains("password"));
  modules::outcome plpgsql = run("postgres.is_installed_extension", {"plpgsql"}, c);
  EXPECT_EQ(plpgsql.ret, true);
  modules::outcome err = run("postgres.psql_query", {"SELECT * FROM no_such_table"}, c);
  EXPECT_FALSE(err.success);
  EXPECT_NE(err.ret.get<std::string>().find("relation \"no_such_table\" does not exist"),
            std::string::npos);
}

TEST_F(postgres_states, a_slow_query_is_cancelled_at_the_job_limit) {
  json c = {{"host", pg_->socket_dir()}, {"port", pg_->port()}, {"user", "postgres"}};
  auto started = std::chrono::steady_clock::now();
  modules::outcome o =
      run("postgres.psql_query", {"SELECT pg_sleep(60)"}, c, std::chrono::seconds(1));
  auto took = std::chrono::steady_clock::now() - started;
  EXPECT_FALSE(o.success) << o.ret.dump();
  EXPECT_LT(took, std::chrono::seconds(20));
  // The connection was closed: the server ends the sleeping session.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (sql("SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(60)'") != "0") {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the sleeping session stayed";
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

TEST_F(postgres_states, an_unknown_password_algorithm_is_refused_with_the_choices) {
  json r = call("postgres_user.present",
                low({{"name", "gina"}, {"password", "x"}, {"encrypted", "sha1"}}));
  EXPECT_EQ(r["result"], false);
  EXPECT_EQ(r["comment"],
            "Unknown password algorithm: sha1 (encrypted must be md5, scram-sha-256, True or "
            "False)");
  EXPECT_EQ(sql("SELECT count(*) FROM pg_roles WHERE rolname = 'gina'"), "0");
}

}  // namespace
}  // namespace brine::states
