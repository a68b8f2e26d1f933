// The master's answer to `brine inventory` (the local API's `inventory`):
// from the keys and the minion data cache in memory.

#include "master/inventory.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace brine::master {
namespace {

using nlohmann::json;

store::key_record key(std::string id, store::key_state state) {
  store::key_record k;
  k.id = id;
  k.state = state;
  k.pubkey = "-----BEGIN PUBLIC KEY-----\n";
  k.fingerprint = "fp:" + id;
  return k;
}

json field(const char* from, std::vector<std::string> path) {
  return {{"from", from}, {"path", std::move(path)}};
}

struct fleet {
  store_worker store{store::open_sqlite(":memory:")};
  minion_cache cache{store, "m1"};
  pki::key_registry keys{pki::key_policy{}};

  fleet() {
    keys.load({key("web1", store::key_state::accepted), key("web2", store::key_state::accepted),
               key("db1", store::key_state::accepted), key("new1", store::key_state::pending)});
    cache.set_grains("web1", {{"os", "Debian"},
                              {"osrelease", "12"},
                              {"ip4_interfaces", {{"eth0", {"10.0.0.1", "10.0.0.2"}}}}});
    cache.set_grains("db1", {{"os", "Rocky"}, {"osrelease", "9.3"}});
    cache.set_grains("new1", {{"os", "Debian"}});
    cache.set_pillar("web1", std::make_shared<const json>(json{{"role", "web"}}));
    cache.seen("web1", 1700000000, true);
    cache.presence("m2", {"db1"}, {}, 1700000100);
    // web2: an accepted key, nothing cached.
  }
  ~fleet() { store.stop(); }

  json ask(const std::string& target, const std::string& tgt_type, json fields) {
    json a = answer_inventory(
        {{"target", target}, {"tgt_type", tgt_type}, {"fields", std::move(fields)}}, keys, cache,
        {});
    if (!a.contains("rows_msgpack")) return a;
    // The rows, [[id, value per field], ...], as a generic MessagePack
    // reader sees them: split into ids and values here.
    json all = json::from_msgpack(a["rows_msgpack"].get_binary());
    EXPECT_EQ(all.size(), a.value("count", size_t{0}));
    a.erase("rows_msgpack");
    a["ids"] = json::array();
    a["rows"] = json::array();
    for (auto& row : all) {
      a["ids"].push_back(row[0]);
      row.erase(row.begin());
      a["rows"].push_back(std::move(row));
    }
    return a;
  }
};

TEST(inventory, every_accepted_minion_in_id_order_with_its_fields) {
  fleet f;
  auto a = f.ask(
      "*", "glob",
      {field("builtin", {"id"}), field("grain", {"os"}), field("builtin", {"master"}),
       field("builtin", {"connected"}), field("builtin", {"last_seen"}), field("builtin", {"key"}),
       field("builtin", {"key.fingerprint"}), field("builtin", {"last_run.status"})});
  ASSERT_TRUE(a.value("ok", false)) << a.dump();
  EXPECT_EQ(a["ids"], json({"db1", "web1", "web2"}));  // not the pending new1
  EXPECT_EQ(a["rows"][0],
            json({"db1", "Rocky", "m2", true, 1700000100, "accepted", "fp:db1", nullptr}));
  EXPECT_EQ(a["rows"][1],
            json({"web1", "Debian", "m1", true, 1700000000, "accepted", "fp:web1", nullptr}));
  // Nothing cached: no grain, no master, never seen.
  EXPECT_EQ(a["rows"][2],
            json({"web2", nullptr, "", false, nullptr, "accepted", "fp:web2", nullptr}));
}

report::report run(std::string jid, std::string minion, int64_t started, report::run_status status,
                   bool test = false) {
  report::report r;
  r.jid = std::move(jid);
  r.minion = std::move(minion);
  r.fun = test ? "state.test" : "state.apply";
  r.started_ms = started;
  r.status = status;
  r.test = test;
  return r;
}

// The master answers each minion's latest run (by start, then jid) from
// memory: the reports it made, and those its peers made (store_sync).
TEST(inventory, last_runs_are_each_minions_latest) {
  fleet f;
  f.cache.ran({run("20260101000000000002", "web1", 2000, report::run_status::failed),
               run("20260101000000000001", "web1", 1000, report::run_status::changed),
               run("20260101000000000003", "db1", 3000, report::run_status::unchanged, true)});
  // Heard later, started earlier: not the latest.
  f.cache.ran("web1", {"20260101000000000000", "state.apply", 500, report::run_status::changed});
  json fields = {field("builtin", {"id"}),
                 field("builtin", {"last_run.status"}),
                 field("builtin", {"last_run.started"}),
                 field("builtin", {"last_run.jid"}),
                 field("builtin", {"last_run.function"}),
                 field("builtin", {"last_run.test"})};
  auto a = f.ask("*", "glob", fields);
  ASSERT_TRUE(a.value("ok", false)) << a.dump();
  EXPECT_EQ(a["rows"][0],
            json({"db1", "unchanged", 3000, "20260101000000000003", "state.test", true}));
  EXPECT_EQ(a["rows"][1],
            json({"web1", "failed", 2000, "20260101000000000002", "state.apply", false}));
  EXPECT_EQ(a["rows"][2], json({"web2", nullptr, nullptr, nullptr, nullptr, nullptr}));

  // A deleted minion's last run goes with its data.
  f.cache.forget("web1");
  f.cache.read([](const minion_cache::lookup& find) { EXPECT_EQ(find("web1").last_run, nullptr); });
}

TEST(inventory, paths_index_objects_and_lists_as_the_cli_does) {
  fleet f;
  auto a = f.ask(
      "web1", "glob",
      {field("grain", {"ip4_interfaces", "eth0", "1"}), field("grain", {"ip4_interfaces", "eth0"}),
       field("grain", {"ip4_interfaces", "eth0", "2"}),
       field("grain", {"ip4_interfaces", "eth0", "x"}), field("grain", {"os", "deeper"}),
       field("pillar", {"role"}), field("pillar", {"nothing"})});
  ASSERT_TRUE(a.value("ok", false)) << a.dump();
  EXPECT_EQ(
      a["rows"][0],
      json({"10.0.0.2", {"10.0.0.1", "10.0.0.2"}, nullptr, nullptr, nullptr, "web", nullptr}));
  // Every kind of value comes back as it was cached.
  json kinds = {{"f", 2.5},
                {"neg", -40000},
                {"big", uint64_t{1} << 63},
                {"t", true},
                {"n", nullptr},
                {"s", std::string(300, 's')},
                {"m", {{"k", {1, {{"x", "y"}}}}}}};
  f.cache.set_grains("web2", kinds);
  json asked = json::array();
  for (const auto& [k, v] : kinds.items()) asked.push_back(field("grain", {k}));
  a = f.ask("web2", "glob", asked);
  json want = json::array();
  for (const auto& [k, v] : kinds.items()) want.push_back(v);
  EXPECT_EQ(a["rows"][0], want);
}

TEST(inventory, targets_match_the_cache_and_do_not_guess) {
  fleet f;
  auto ids = [&](const std::string& t, const std::string& type) {
    return f.ask(t, type, {field("builtin", {"id"})})["ids"];
  };
  EXPECT_EQ(ids("os:Debian", "grain"), json({"web1"}));  // web2: no grains cached
  EXPECT_EQ(ids("G@os:Rocky or web2", "compound"), json({"db1", "web2"}));
  EXPECT_EQ(ids("role:web", "pillar"), json({"web1"}));
  EXPECT_EQ(ids("nomatch*", "glob"), json::array());
}

TEST(inventory, a_bad_target_or_field_is_refused_saying_what) {
  fleet f;
  auto a = f.ask("G@os:Debian and (", "compound", {field("builtin", {"id"})});
  EXPECT_FALSE(a.value("ok", true));
  EXPECT_TRUE(a.value("bad_target", false));
  EXPECT_FALSE(a.value("error", "").empty());
  a = f.ask("*", "nosuchtype", {field("builtin", {"id"})});
  EXPECT_NE(a.value("error", "").find("nosuchtype"), std::string::npos) << a.dump();
  a = f.ask("*", "glob", {field("secret", {"id"})});
  EXPECT_NE(a.value("error", "").find("builtin, grain or pillar"), std::string::npos) << a.dump();
  a = f.ask("*", "glob", json::array({{{"from", "grain"}, {"path", json::array()}}}));
  EXPECT_NE(a.value("error", "").find("path"), std::string::npos) << a.dump();
}

}  // namespace
}  // namespace brine::master
