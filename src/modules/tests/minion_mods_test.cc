// Tests of the modules that read the minion (grains, pillar, config, sys,
// saltutil) through a context the test controls, and of the data helpers
// they share.

#include <gtest/gtest.h>

#include <ctime>

#include <fstream>
#include <optional>

#include "http/server.h"
#include "modules/context.h"
#include "modules/data.h"
#include "modules/registry.h"
#include "test_util.h"

namespace brine::modules {
namespace {

using nlohmann::json;
using testing::run_sync;

class fake_context : public minion_context {
 public:
  fake_context(const registry& reg, std::string dir) : reg_(reg), dir_(std::move(dir)) {}
  const std::string& id() const override { return id_; }
  std::shared_ptr<const json> grains() const override { return std::make_shared<json>(grains_); }
  std::shared_ptr<const json> pillar() const override { return std::make_shared<json>(pillar_); }
  const json& opts() const override { return opts_; }
  std::string grains_file() const override { return dir_ + "/grains"; }
  const registry& functions() const override { return reg_; }
  void refresh_grains() override { ++grain_refreshes; }
  bool refresh_pillar(std::string& why) override {
    why = "no master in this test";
    return false;
  }
  asio::awaitable<std::shared_ptr<const json>> fresh_pillar() override {
    if (!fresh_) co_return pillar();
    co_return std::make_shared<const json>(*fresh_);
  }
  std::vector<running_job> running() const override { return jobs; }
  bool kill_job(const std::string& jid) override {
    killed.push_back(jid);
    return jid == "1";
  }

  std::string id_ = "web1";
  json grains_ = {{"id", "web1"},
                  {"os_family", "Debian"},
                  {"roles", {"web", "cache"}},
                  {"ip_interfaces", {{"eth0", {"10.0.0.5", "fe80::1"}}}},
                  {"disks", json::array({{{"name", "sda"}}, {{"size", 10}}})}};
  json pillar_ = {{"users", {{"alice", {{"uid", 1000}}}}}, {"apps", {"nginx"}}};
  std::optional<json> fresh_;  // what the master would compile now
  json opts_ = {{"id", "web1"}, {"master", "salt"}, {"shared", "from-opts"}};
  std::vector<running_job> jobs;
  std::vector<std::string> killed;
  int grain_refreshes = 0;

 private:
  const registry& reg_;
  std::string dir_;
};

class minion_mods : public testing::module_test {
 protected:
  minion_mods() : module_test(register_builtin_modules) {}
  outcome run(std::string fun, json args = json::array(), json kwargs = json::object()) {
    call c = make_call(std::move(fun), std::move(args), std::move(kwargs));
    c.context = &ctx_;
    return execute_call(std::move(c));
  }
  testing::temp_dir dir_;
  fake_context ctx_{reg_, dir_.path()};
};

TEST(data, traverse_walks_maps_lists_and_maps_in_lists) {
  json d = {{"a", {{"b", {10, 20, 30}}}}, {"l", json::array({{{"x", 1}}, {{"y", 2}}})}};
  struct row {
    const char* key;
    json want;  // null: not found
  } rows[] = {{"a:b:0", 10}, {"a:b:-1", 30}, {"a:b:3", nullptr}, {"a:b:z", nullptr},
              {"l:y", 2},    {"l:1", {{"y", 2}}}, {"a:c", nullptr}, {"a:b:0:x", nullptr}};
  for (const auto& r : rows) {
    const json* v = traverse(d, r.key);
    if (r.want.is_null()) {
      EXPECT_EQ(v, nullptr) << r.key;
    } else {
      ASSERT_NE(v, nullptr) << r.key;
      EXPECT_EQ(*v, r.want) << r.key;
    }
  }
  ASSERT_NE(traverse(d, "a|b|1", "|"), nullptr);
  EXPECT_EQ(*traverse(d, "a|b|1", "|"), 20);
}

TEST(data, dict_update_recurses_and_merges_lists_when_asked) {
  json dest = {{"a", {{"x", 1}, {"l", {1}}}}, {"s", "old"}};
  json upd = {{"a", {{"y", 2}, {"l", {2}}}}, {"s", {{"now", "map"}}}};
  json plain = dest;
  dict_update(plain, upd);
  EXPECT_EQ(plain, json({{"a", {{"x", 1}, {"y", 2}, {"l", {2}}}}, {"s", {{"now", "map"}}}}));
  dict_update(dest, upd, true);
  EXPECT_EQ(dest["a"]["l"], json({1, 2}));
  // Only the items the list lacks, judged against the list as it was.
  dict_update(dest, json{{"a", {{"l", {2, 3, 3}}}}}, true);
  EXPECT_EQ(dest["a"]["l"], json({1, 2, 3, 3}));
}

// Salt's has_value: the key is there, whatever its value.
TEST_F(minion_mods, grains_has_value_is_presence_not_truth) {
  ctx_.grains_["empty"] = "";
  ctx_.grains_["none"] = nullptr;
  EXPECT_EQ(run("grains.has_value", {"os_family"}).ret, true);
  EXPECT_EQ(run("grains.has_value", {"ip_interfaces:eth0:0"}).ret, true);
  EXPECT_EQ(run("grains.has_value", {"empty"}).ret, true);
  EXPECT_EQ(run("grains.has_value", {"none"}).ret, true);
  EXPECT_EQ(run("grains.has_value", {"nope"}).ret, false);
  EXPECT_EQ(run("grains.has_value", {"os_family:deeper"}).ret, false);
}

TEST_F(minion_mods, grains_get_traverses_with_default_and_delimiter) {
  EXPECT_EQ(run("grains.get", {"os_family"}).ret, "Debian");
  EXPECT_EQ(run("grains.get", {"ip_interfaces:eth0:0"}).ret, "10.0.0.5");
  EXPECT_EQ(run("grains.get", {"disks:size"}).ret, 10);
  EXPECT_EQ(run("grains.get", {"nope"}).ret, "");
  EXPECT_EQ(run("grains.get", {"nope"}, {{"default", "x"}}).ret, "x");
  EXPECT_EQ(run("grains.get", {"ip_interfaces|eth0|1"}, {{"delimiter", "|"}}).ret, "fe80::1");
  outcome bad = run("grains.get", {"os"}, {{"colour", "red"}});
  EXPECT_FALSE(bad.success);
  EXPECT_NE(bad.ret.get<std::string>().find("unknown keyword argument 'colour'"),
            std::string::npos)
      << bad.ret;
}

TEST_F(minion_mods, grains_items_item_ls) {
  EXPECT_EQ(run("grains.items").ret, ctx_.grains_);
  EXPECT_EQ(run("grains.item", {"os_family", "missing"}).ret,
            json({{"os_family", "Debian"}, {"missing", ""}}));
  EXPECT_EQ(run("grains.ls").ret, json({"disks", "id", "ip_interfaces", "os_family", "roles"}));
}

TEST_F(minion_mods, grains_filter_by_globs_default_base_and_merge) {
  json lookup = {{"Deb*", {{"pkg", "apache2"}}},
                 {"RedHat", {{"pkg", "httpd"}}},
                 {"default", {{"pkg", "none"}}},
                 {"common", {{"port", 80}, {"pkg", "base"}}}};
  EXPECT_EQ(run("grains.filter_by", {lookup}).ret, json({{"pkg", "apache2"}}));
  EXPECT_EQ(run("grains.filter_by", {lookup}, {{"grain", "id"}}).ret, json({{"pkg", "none"}}));
  EXPECT_EQ(run("grains.filter_by", {lookup}, {{"base", "common"}}).ret,
            json({{"pkg", "apache2"}, {"port", 80}}));
  EXPECT_EQ(run("grains.filter_by", {lookup}, {{"merge", {{"port", 8080}}}}).ret,
            json({{"pkg", "apache2"}, {"port", 8080}}));
  // A list grain: the first value that matches a key.
  EXPECT_EQ(run("grains.filter_by", {{{"cache", 1}, {"web", 2}}}, {{"grain", "roles"}}).ret, 2);
  EXPECT_FALSE(run("grains.filter_by", {"not a map"}).success);
}

TEST_F(minion_mods, grains_setval_and_delval_write_the_grains_file_and_refresh) {
  EXPECT_EQ(run("grains.setval", {"role", "web"}).ret, json({{"role", "web"}}));
  EXPECT_EQ(run("grains.setval", {"ports", json::array({80, 443})}).ret,
            json({{"ports", {80, 443}}}));
  std::ifstream in(ctx_.grains_file());
  json file = json::parse(in);
  EXPECT_EQ(file, json({{"role", "web"}, {"ports", {80, 443}}}));
  EXPECT_EQ(run("grains.delval", {"role"}).ret, json({{"role", nullptr}}));
  EXPECT_TRUE(run("grains.delval", {"ports"}, {{"destructive", true}}).success);
  std::ifstream again(ctx_.grains_file());
  EXPECT_EQ(json::parse(again), json({{"role", nullptr}}));
  EXPECT_EQ(ctx_.grain_refreshes, 4);
  EXPECT_FALSE(run("grains.setval", {"only-key"}).success);
}

// Salt's dnsutil.serial: the stored grain, else today's YYYYMMDD01; with
// update, the next one (today's when the stored one is older), stored.
TEST_F(minion_mods, dnsutil_serial_counts_in_a_grain) {
  char buf[16];
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::localtime_r(&now, &tm);
  std::strftime(buf, sizeof buf, "%Y%m%d01", &tm);
  const std::string today = buf;
  EXPECT_EQ(run("dnsutil.serial", {"example.com"}).ret, today);
  ctx_.grains_["dnsserial_example.com"] = "2020010105";
  EXPECT_EQ(run("dnsutil.serial", {"example.com"}).ret, "2020010105");
  EXPECT_EQ(run("dnsutil.serial", {"example.com"}, {{"update", true}}).ret, today);
  ctx_.grains_["dnsserial_example.com"] = "9999010101";
  EXPECT_EQ(run("dnsutil.serial", {"example.com"}, {{"update", true}}).ret, "9999010102");
  std::ifstream in(ctx_.grains_file());
  EXPECT_EQ(json::parse(in)["dnsserial_example.com"], "9999010102");
}

TEST_F(minion_mods, pillar_items_is_compiled_now_raw_is_what_the_minion_holds) {
  EXPECT_EQ(run("pillar.items").ret, ctx_.pillar_);  // no one to ask: the kept pillar
  ctx_.fresh_ = json{{"apps", {"nginx", "redis"}}};
  EXPECT_EQ(run("pillar.items").ret, *ctx_.fresh_);
  EXPECT_EQ(run("pillar.raw").ret, ctx_.pillar_);
  EXPECT_EQ(run("pillar.raw", json::array(), {{"key", "apps"}}).ret, json({"nginx"}));
  EXPECT_EQ(run("pillar.raw", {"users"}).ret, ctx_.pillar_["users"]);
  EXPECT_EQ(run("pillar.raw", {"users:alice"}).ret, json::object());  // no ':' walk
  EXPECT_EQ(run("pillar.get", {"apps"}).ret, json({"nginx"}));
}

TEST_F(minion_mods, pillar_functions) {
  EXPECT_EQ(run("pillar.items").ret, ctx_.pillar_);
  EXPECT_EQ(run("pillar.get", {"users:alice:uid"}).ret, 1000);
  EXPECT_EQ(run("pillar.get", {"users:bob"}, {{"default", "none"}}).ret, "none");
  EXPECT_EQ(run("pillar.get", {"users:alice"}, {{"default", {{"shell", "/bin/sh"}}}, {"merge", true}})
                .ret,
            json({{"uid", 1000}, {"shell", "/bin/sh"}}));
  EXPECT_EQ(run("pillar.get", {"apps"}, {{"default", {"vim"}}, {"merge", true}}).ret,
            json({"vim", "nginx"}));
  EXPECT_EQ(run("pillar.item", {"apps", "nope"}).ret, json({{"apps", {"nginx"}}, {"nope", ""}}));
  EXPECT_EQ(run("pillar.ls").ret, json({"apps", "users"}));
  EXPECT_FALSE(run("pillar.get").success);
}

TEST_F(minion_mods, config_get_reads_opts_then_grains_then_pillar) {
  ctx_.grains_["shared"] = "from-grains";
  ctx_.pillar_["shared"] = "from-pillar";
  ctx_.pillar_["only_pillar"] = {{"a", 1}};
  ctx_.grains_["only_pillar"] = {{"b", 2}};
  EXPECT_EQ(run("config.get", {"shared"}).ret, "from-opts");
  EXPECT_EQ(run("config.get", {"os_family"}).ret, "Debian");
  EXPECT_EQ(run("config.get", {"users:alice:uid"}).ret, 1000);
  EXPECT_EQ(run("config.get", {"nope"}, {{"default", 5}}).ret, 5);
  EXPECT_EQ(run("config.get", {"only_pillar"}, {{"merge", "recurse"}}).ret,
            json({{"a", 1}, {"b", 2}}));
  // Salt warns and merges recursively.
  EXPECT_EQ(run("config.get", {"only_pillar"}, {{"merge", "sideways"}}).ret,
            json({{"a", 1}, {"b", 2}}));
}

TEST_F(minion_mods, config_get_looks_at_the_masters_options_and_salts_defaults_last) {
  EXPECT_EQ(run("config.get", {"mongo.port"}).ret, 27017);
  EXPECT_EQ(run("config.get", {"virt:images"}).ret, "/srv/salt-images");
  ctx_.grains_["mongo.port"] = 1234;
  EXPECT_EQ(run("config.get", {"mongo.port"}).ret, 1234);
  ctx_.pillar_["master"] = {{"worker_threads", 9}, {"shared", "from-master"}};
  EXPECT_EQ(run("config.get", {"worker_threads"}).ret, 9);
  EXPECT_EQ(run("config.get", {"shared"}, {{"omit_opts", true}}).ret, "from-master");
  EXPECT_EQ(run("config.get", {"worker_threads"}, {{"omit_master", true}}).ret, "");
  EXPECT_EQ(run("config.get", {"id"}, {{"omit_opts", true}, {"omit_grains", true}}).ret, "");
}

TEST_F(minion_mods, config_get_merges_every_source_then_walks_the_key) {
  ctx_.opts_["nested"] = {{"x", {{"o", 1}}}, {"only_opts", true}};
  ctx_.grains_["nested"] = {{"x", {{"g", 2}, {"o", 0}}}, {"only_grains", true}};
  ctx_.pillar_["nested"] = {{"x", {{"p", 3}}}, {"l", {1, 2}}};
  ctx_.pillar_["master"] = {{"nested", {{"m", 4}}}};
  EXPECT_EQ(run("config.get", {"nested"}).ret, ctx_.opts_["nested"]);  // the first source
  json recurse = run("config.get", {"nested"}, {{"merge", "recurse"}}).ret;
  EXPECT_EQ(recurse, json({{"x", {{"o", 1}, {"g", 2}, {"p", 3}}},
                           {"only_opts", true},
                           {"only_grains", true},
                           {"l", {1, 2}},
                           {"m", 4}}));
  // Overwrite: a source replaces a top-level key whole.
  EXPECT_EQ(run("config.get", {"nested"}, {{"merge", "overwrite"}}).ret, ctx_.opts_["nested"]);
  EXPECT_EQ(run("config.get", {"nested:x:p"}, {{"merge", "recurse"}}).ret, 3);
  EXPECT_EQ(run("config.get", {"nested|x|g"}, {{"merge", "recurse"}, {"delimiter", "|"}}).ret, 2);
  EXPECT_EQ(run("config.get", {"nested:x:p"}, {{"merge", "overwrite"}, {"default", "d"}}).ret,
            "d");
  // omit_* do not apply to a merge (as in Salt).
  EXPECT_EQ(run("config.get", {"nested:x:g"}, {{"merge", "recurse"}, {"omit_grains", true}}).ret,
            2);
  EXPECT_EQ(run("config.get", {"mongo.db"}, {{"merge", "recurse"}}).ret, "salt");
  ctx_.pillar_["master"] = "not a map";
  outcome o = run("config.get", {"nested"}, {{"merge", "recurse"}});
  EXPECT_FALSE(o.success);
  EXPECT_NE(o.ret.get<std::string>().find("pillar key 'master'"), std::string::npos) << o.ret;
}

TEST_F(minion_mods, config_option_reads_top_level_keys_in_salts_order) {
  ctx_.grains_["shared"] = "from-grains";
  ctx_.grains_["g.only"] = "grain";
  ctx_.pillar_["shared"] = "from-pillar";
  ctx_.pillar_["p.only"] = {{"k", 1}};
  ctx_.pillar_["master"] = {{"m.only", 7}, {"shared", "from-master"}, {"mongo.port", 1}};
  EXPECT_EQ(run("config.option", {"shared"}).ret, "from-opts");
  EXPECT_EQ(run("config.option", {"shared"}, {{"omit_opts", true}}).ret, "from-grains");
  EXPECT_EQ(run("config.option", {"shared"}, {{"omit_opts", true}, {"omit_grains", true}}).ret,
            "from-pillar");
  EXPECT_EQ(run("config.option", {"shared"},
                {{"omit_opts", true}, {"omit_grains", true}, {"omit_pillar", true}})
                .ret,
            "from-master");
  EXPECT_EQ(run("config.option", {"p.only"}).ret, json({{"k", 1}}));
  EXPECT_EQ(run("config.option", {"m.only"}).ret, 7);
  EXPECT_EQ(run("config.option", {"mongo.port"}).ret, 1) << "the master's before the defaults";
  EXPECT_EQ(run("config.option", {"mongo.port"}, {{"omit_all", true}}).ret, 27017);
  EXPECT_EQ(run("config.option", {"redis.host"}).ret, "salt");
  // No walk into nested keys (config.get's ':').
  EXPECT_EQ(run("config.option", {"users:alice"}).ret, "");
  EXPECT_EQ(run("config.option", {"nope"}, {{"default", 5}}).ret, 5);
  EXPECT_EQ(run("config.option", {"nope"}, {{"default", nullptr}}).ret, "");
  EXPECT_EQ(run("config.option", {42}).ret, "") << "a key that is not text matches nothing";
  // A 'master' pillar that is not a mapping is no source.
  ctx_.pillar_["master"] = "salt.example.com";
  EXPECT_EQ(run("config.option", {"m.only"}).ret, "");
  EXPECT_FALSE(run("config.option").success);
  EXPECT_FALSE(run("config.option", {"x"}, {{"colour", 1}}).success);
}

TEST_F(minion_mods, config_option_with_wildcard_maps_every_match) {
  ctx_.opts_["ldap.uri"] = "ldap://opts";
  ctx_.grains_["ldap.port"] = "636";
  ctx_.pillar_["ldap.tls"] = true;
  ctx_.pillar_["master"] = {{"ldap.uri", "ldap://master"}, {"ldap.server", "m"}};
  json all = run("config.option", {"ldap.*"}, {{"wildcard", true}}).ret;
  EXPECT_EQ(all["ldap.uri"], "ldap://opts") << "the minion's options win";
  EXPECT_EQ(all["ldap.port"], "636");
  EXPECT_EQ(all["ldap.tls"], true);
  EXPECT_EQ(all["ldap.server"], "m");
  EXPECT_EQ(all["ldap.scope"], 2) << "defaults fill in";
  EXPECT_EQ(all.size(), 10u) << all;  // the ten ldap.* defaults, no other key
  json defaults = run("config.option", {"mongo.*"}, {{"wildcard", true}, {"omit_all", true}}).ret;
  EXPECT_EQ(defaults, json({{"mongo.db", "salt"},
                            {"mongo.password", ""},
                            {"mongo.port", 27017},
                            {"mongo.user", ""}}));
  EXPECT_EQ(run("config.option", {"ldap.[st]*"}, {{"wildcard", true}, {"omit_all", true}}).ret,
            json({{"ldap.scope", 2}, {"ldap.server", "localhost"}, {"ldap.tls", false}}));
  EXPECT_EQ(run("config.option", {"zz*"}, {{"wildcard", true}}).ret, json::object());
  EXPECT_EQ(run("config.option", {"zz*"}, {{"wildcard", true}, {"default", "none"}}).ret, "none");
}

TEST_F(minion_mods, config_merge_combines_opts_master_and_pillar) {
  ctx_.opts_["sched"] = {{"a", "opts"}, {"b", "opts"}};
  ctx_.pillar_["master"] = {{"sched", {{"b", "master"}, {"c", "master"}}},
                            {"lst", {3}}, {"text", "m"}};
  ctx_.pillar_["sched"] = {{"c", "pillar"}, {"d", {{"deep", 1}}}};
  ctx_.pillar_["lst"] = {4, 5};
  ctx_.pillar_["text"] = "p";
  ctx_.grains_["sched"] = {{"e", "grains are not read"}};
  EXPECT_EQ(run("config.merge", {"sched"}).ret, json({{"a", "opts"},
                                                      {"b", "opts"},
                                                      {"c", "master"},
                                                      {"d", {{"deep", 1}}}}));
  EXPECT_EQ(run("config.merge", {"sched"}, {{"omit_opts", true}}).ret,
            json({{"b", "master"}, {"c", "master"}, {"d", {{"deep", 1}}}}));
  EXPECT_EQ(run("config.merge", {"sched"}, {{"omit_master", true}, {"omit_pillar", true}}).ret,
            ctx_.opts_["sched"]);
  EXPECT_EQ(run("config.merge", {"lst"}).ret, json({3, 4, 5}));
  EXPECT_EQ(run("config.merge", {"text"}).ret, "m") << "the first text found is the answer";
  ctx_.opts_["lst"] = "x";
  EXPECT_EQ(run("config.merge", {"lst"}).ret, "x");
  ctx_.opts_["lst"] = 9;
  EXPECT_EQ(run("config.merge", {"lst"}).ret, 9) << "an int and a list do not combine";
  EXPECT_EQ(run("config.merge", {"redis.port"}).ret, 6379);
  EXPECT_EQ(run("config.merge", {"e"}).ret, "");
  EXPECT_EQ(run("config.merge", {"e"}, {{"default", {1}}}).ret, json({1}));
}

TEST_F(minion_mods, config_dot_vals_items_and_the_small_ones) {
  ctx_.opts_["mysql.host"] = "db";
  ctx_.opts_["mysql.port"] = 3306;
  ctx_.opts_["mysqlx"] = 1;
  ctx_.pillar_["master"] = {{"mysql.port", 1}, {"mysql.user", "root"}};
  EXPECT_EQ(run("config.dot_vals", {"mysql"}).ret,
            json({{"mysql.host", "db"}, {"mysql.port", 3306}, {"mysql.user", "root"}}));
  EXPECT_EQ(run("config.dot_vals", {"nope"}).ret, json::object());
  EXPECT_EQ(run("config.items").ret, ctx_.opts_);

  struct row {
    std::string uri;
    bool valid;
  };
  // Python's urlparse(uri).scheme in Salt's VALID_PROTOS.
  for (const row& r : {row{"salt://x", true}, row{"HTTPS://a", true}, row{"s3://b", true},
                       row{"ftp:x", true}, row{" \x01salt://x", true}, row{"sa\tlt://x", true},
                       row{"file:///etc", true}, row{"swift://a", true}, row{"c:/x", false},
                       row{"1salt://x", false}, row{"/etc/x", false}, row{"git://x", false},
                       row{"", false}}) {
    EXPECT_EQ(run("config.valid_fileproto", {r.uri}).ret, r.valid) << r.uri;
  }

  EXPECT_EQ(run("config.backup_mode").ret, "");
  EXPECT_EQ(run("config.backup_mode", {"minion"}).ret, "minion");
  ctx_.opts_["backup_mode"] = "minion";
  EXPECT_EQ(run("config.backup_mode").ret, "minion");

  // salt.utils.files.normalize_mode, as Python gives it.
  struct mode_row {
    json mode;
    json want;
  };
  for (const mode_row& r : {mode_row{"0o644", "0644"}, mode_row{644, "0644"},
                            mode_row{"\"0755\"", "0755"}, mode_row{"00600", "0600"},
                            mode_row{"'4755'", "4755"}, mode_row{"0", "0000"},
                            mode_row{"keep", "keep"}, mode_row{"7", "0007"},
                            mode_row{nullptr, nullptr}}) {
    EXPECT_EQ(run("config.manage_mode", {r.mode}).ret, r.want) << r.mode;
  }
}

TEST_F(minion_mods, pillar_get_merges_as_salt_does) {
  // A list default gets the items it lacks; a dict default has the value
  // merged into it; a mismatch is logged and the value returned.
  EXPECT_EQ(run("pillar.get", {"apps"}, {{"default", {"vim", "nginx"}}, {"merge", true}}).ret,
            json({"vim", "nginx"}));
  EXPECT_EQ(run("pillar.get", {"apps"}, {{"default", {{"k", 1}}}, {"merge", true}}).ret,
            json({"nginx"}));
  EXPECT_EQ(run("pillar.get", {"apps"}, {{"default", "x"}, {"merge", true}}).ret, json({"nginx"}));
  EXPECT_EQ(run("pillar.get", {"nope"}, {{"default", {{"k", 1}}}, {"merge", true}}).ret,
            json({{"k", 1}}));
  ctx_.pillar_["cfg"] = {{"l", {2}}, {"s", "p"}};
  json dflt = {{"l", {1}}, {"t", "d"}};
  EXPECT_EQ(run("pillar.get", {"cfg"}, {{"default", dflt}, {"merge", true}}).ret,
            json({{"l", {2}}, {"s", "p"}, {"t", "d"}}));
  EXPECT_EQ(run("pillar.get", {"cfg"},
                {{"default", dflt}, {"merge", true}, {"merge_nested_lists", true}})
                .ret["l"],
            json({1, 2}));
  ctx_.opts_["pillar_merge_lists"] = true;
  EXPECT_EQ(run("pillar.get", {"cfg"}, {{"default", dflt}, {"merge", true}}).ret["l"],
            json({1, 2}));
  EXPECT_EQ(run("pillar.get", {"cfg"},
                {{"default", dflt}, {"merge", true}, {"merge_nested_lists", false}})
                .ret["l"],
            json({2}));
  ctx_.opts_["pillar_raise_on_missing"] = true;
  EXPECT_FALSE(run("pillar.get", {"nope"}).success);
  EXPECT_EQ(run("pillar.get", {"nope"}, {{"default", 1}}).ret, 1);
}

TEST_F(minion_mods, pillar_environments_compile_now_or_are_refused) {
  ctx_.fresh_ = json{{"apps", {"nginx", "redis"}}};
  // saltenv alone: a pillar compiled now for the minion's own environments.
  EXPECT_EQ(run("pillar.get", {"apps"}, {{"saltenv", "base"}}).ret, json({"nginx", "redis"}));
  EXPECT_EQ(run("pillar.item", {"apps"}, {{"saltenv", "base"}}).ret,
            json({{"apps", {"nginx", "redis"}}}));
  EXPECT_EQ(run("pillar.get", {"apps"}).ret, json({"nginx"}));  // the held pillar
  // Another environment: refused, naming the argument.
  for (const char* fun : {"pillar.get", "pillar.item", "pillar.items"}) {
    json args = std::string(fun) == "pillar.items" ? json::array() : json({"apps"});
    outcome o = run(fun, args, {{"pillarenv", "dev"}});
    EXPECT_FALSE(o.success) << fun;
    EXPECT_NE(o.ret.get<std::string>().find("pillarenv='dev'"), std::string::npos) << o.ret;
  }
  ctx_.opts_["pillarenv_from_saltenv"] = true;
  outcome o = run("pillar.get", {"apps"}, {{"saltenv", "dev"}});
  EXPECT_FALSE(o.success);
  EXPECT_NE(o.ret.get<std::string>().find("saltenv='dev'"), std::string::npos) << o.ret;
  // The minion's own pillarenv is what a fresh pillar is compiled for.
  ctx_.opts_["pillarenv"] = "dev";
  EXPECT_EQ(run("pillar.get", {"apps"}, {{"pillarenv", "dev"}}).ret, json({"nginx", "redis"}));
}

TEST_F(minion_mods, pillar_items_with_keys_or_an_override) {
  ctx_.fresh_ = json{{"apps", {"nginx"}}, {"users", {{"alice", {{"uid", 1000}}}}}};
  EXPECT_EQ(run("pillar.items", {"apps"}).ret, json({{"apps", {"nginx"}}}));
  EXPECT_EQ(run("pillar.items", json::array(), {{"pillar", {{"users", {{"bob", 1}}}}}}).ret,
            json({{"apps", {"nginx"}}, {"users", {{"alice", {{"uid", 1000}}}, {"bob", 1}}}}));
  EXPECT_FALSE(run("pillar.items", json::array(), {{"pillar", "x"}}).success);
  EXPECT_FALSE(run("pillar.items", json::array(), {{"pillar_enc", "gpg"}}).success);
}

TEST_F(minion_mods, sys_lists_and_documents_functions) {
  json grains_funs = run("sys.list_functions", {"grains"}).ret;
  EXPECT_NE(std::find(grains_funs.begin(), grains_funs.end(), "grains.get"), grains_funs.end());
  for (const auto& f : grains_funs) EXPECT_TRUE(f.get<std::string>().starts_with("grains."));
  json mods = run("sys.list_modules").ret;
  for (const char* m : {"cmd", "config", "grains", "pillar", "saltutil", "sys", "test"}) {
    EXPECT_NE(std::find(mods.begin(), mods.end(), m), mods.end()) << m;
  }
  json doc = run("sys.doc", {"test.ping"}).ret;
  ASSERT_EQ(doc.size(), 1u);
  EXPECT_EQ(doc["test.ping"], reg_.doc("test.ping"));
}

TEST_F(minion_mods, saltutil_running_find_and_kill) {
  ctx_.jobs.push_back({"1", "test.sleep", {30}, json::object(), 1.5});
  json running = run("saltutil.running").ret;
  ASSERT_EQ(running.size(), 1u);
  EXPECT_EQ(running[0]["jid"], "1");
  EXPECT_EQ(running[0]["fun"], "test.sleep");
  EXPECT_EQ(run("saltutil.find_job", {"1"}).ret["fun"], "test.sleep");
  EXPECT_EQ(run("saltutil.find_job", {"2"}).ret, json::object());
  EXPECT_EQ(run("saltutil.kill_job", {"1"}).ret, "Signal 9 sent to job 1");
  EXPECT_EQ(run("saltutil.kill_job", {"2"}).ret, "");
  EXPECT_EQ(ctx_.killed, std::vector<std::string>({"1", "2"}));
  EXPECT_TRUE(run("saltutil.refresh_grains").ret.get<bool>());
  outcome p = run("saltutil.refresh_pillar");
  EXPECT_FALSE(p.success);
  EXPECT_NE(p.ret.get<std::string>().find("no master in this test"), std::string::npos);
}

// Salt's mine.get answers from the minion's own mine_cache when file_client
// is local (empty before mine.send); brine's masters keep no mine yet, so
// with a master it says so instead of answering {} for minions with data.
TEST_F(minion_mods, mine_get_answers_empty_masterless_and_is_refused_with_a_master) {
  ctx_.opts_["file_client"] = "local";
  outcome local = run("mine.get", {"*", "network.ip_addrs"});
  EXPECT_TRUE(local.success) << local.ret;
  EXPECT_EQ(local.ret, json::object());

  ctx_.opts_["file_client"] = "remote";
  outcome remote = run("mine.get", {"*", "network.ip_addrs"});
  EXPECT_FALSE(remote.success);
  EXPECT_NE(remote.ret.dump().find("keep no mine yet"), std::string::npos) << remote.ret;

  outcome missing = run("mine.get", {"*"});
  EXPECT_FALSE(missing.success);
  EXPECT_NE(missing.ret.dump().find("fun"), std::string::npos) << missing.ret;
}

TEST_F(minion_mods, cp_cache_file_fetches_a_url_into_the_cache) {
  http::server web("127.0.0.1", 0,
                   [](const http::request& r) {
                     if (r.path == "/motd") return http::response{200, "text/plain", "hello\n"};
                     return http::response{404, "text/plain", "no\n"};
                   },
                   "fix");
  std::string base = "http://127.0.0.1:" + std::to_string(web.port());
  ctx_.opts_["cachedir"] = dir_.path();
  EXPECT_EQ(run("cp.is_cached", {base + "/motd"}).ret, "");
  outcome got = run("cp.cache_file", {base + "/motd"});
  ASSERT_TRUE(got.success) << got.ret;
  std::string want = dir_.path() + "/extrn_files/base/127.0.0.1" + std::to_string(web.port()) + "/motd";
  EXPECT_EQ(got.ret, want);
  std::ifstream in(want);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "hello");
  EXPECT_EQ(run("cp.is_cached", {base + "/motd"}).ret, want);
  outcome missing = run("cp.cache_file", {base + "/gone"}, {{"saltenv", "prod"}});
  EXPECT_FALSE(missing.success);
  EXPECT_EQ(missing.ret, "ERROR: Error: HTTP 404: Not Found reading /gone") << missing.ret;
}

TEST(minion_mods_without_context, say_they_need_a_minion) {
  registry reg;
  register_builtin_modules(reg);
  call c;
  c.fun = "grains.items";
  outcome o = run_sync(execute(reg, c));
  EXPECT_FALSE(o.success);
  EXPECT_NE(o.ret.get<std::string>().find("runs on a minion"), std::string::npos) << o.ret;
}

TEST(test_module_extras, retcode_kwarg_versions) {
  registry reg;
  register_builtin_modules(reg);
  auto exec = [&](std::string fun, json args, json kwargs = json::object()) {
    call c;
    c.fun = std::move(fun);
    c.args = std::move(args);
    c.kwargs = std::move(kwargs);
    return run_sync(execute(reg, c));
  };
  outcome r = exec("test.retcode", json::array({3}));
  EXPECT_EQ(r.ret, true);
  EXPECT_EQ(r.retcode, 3);
  EXPECT_FALSE(r.success);
  EXPECT_EQ(exec("test.retcode", json::array()).retcode, 42);
  EXPECT_TRUE(exec("test.retcode", json::array({0})).success);
  EXPECT_EQ(exec("test.kwarg", json::array(), {{"a", 1}}).ret, json({{"a", 1}}));
  json lines = exec("test.versions_report", json::array()).ret;
  ASSERT_TRUE(lines.is_array());
  EXPECT_EQ(lines[0], "Brine Version:");
  EXPECT_EQ(exec("cmd.which", json::array({"sh"})).ret.get<std::string>().substr(0, 1), "/");
  EXPECT_EQ(exec("cmd.which", json::array({"no-such-exe-brine"})).ret, nullptr);
  EXPECT_EQ(exec("cmd.has_exec", json::array({"sh"})).ret, true);
}

}  // namespace
}  // namespace brine::modules
