#include "master/minion_cache.h"

#include <gtest/gtest.h>

#include <string>

#include "support/temp_dir.h"

namespace brine::master {
namespace {

using nlohmann::json;

json debian_grains(const std::string& id) {
  return {{"id", id},
          {"os", "Debian"},
          {"osrelease_info", {12, 4}},
          {"mem_total", 3915},
          {"ip_interfaces", {{"eth0", {"10.0.0.1", "fd00::1"}}, {"lo", {"127.0.0.1"}}}}};
}

// The cached pillar of `id` as a tree; null when none is cached.
json pillar_of(const minion_cache& cache, const std::string& id) {
  json out;
  cache.read([&](const minion_cache::lookup& lookup) {
    if (auto p = lookup(id).pillar) out = p.to_json();
  });
  return out;
}

TEST(minion_cache, readers_see_packed_data_and_trees_come_back_unchanged) {
  store_worker store(store::open_sqlite(":memory:"));
  minion_cache cache(store, "m1");
  cache.set_grains("web1", debian_grains("web1"));
  cache.set_pillar("web1", std::make_shared<const json>(json{{"role", "web"}}));
  cache.set_grains("db1", debian_grains("db1"));

  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.packed_grains("web1").to_json(), debian_grains("web1"));
  EXPECT_EQ(pillar_of(cache, "web1"), (json{{"role", "web"}}));
  EXPECT_TRUE(pillar_of(cache, "db1").is_null());
  EXPECT_FALSE(cache.packed_grains("nobody"));
  EXPECT_EQ(cache.packed_grains("db1").root().find("id").string(), "db1");
  EXPECT_FALSE(cache.packed_grains("nobody"));

  cache.read([](const minion_cache::lookup& lookup) {
    auto web = lookup("web1");
    ASSERT_TRUE(web.grains);
    EXPECT_EQ(web.grains.find("ip_interfaces").find("eth0").at(1).string(), "fd00::1");
    EXPECT_EQ(web.pillar.find("role").string(), "web");
    auto db = lookup("db1");
    EXPECT_TRUE(db.grains);
    EXPECT_FALSE(db.pillar);
    EXPECT_FALSE(lookup("nobody").grains);
  });
}

TEST(minion_cache, a_reader_keeps_its_document_while_grains_change) {
  store_worker store(store::open_sqlite(":memory:"));
  minion_cache cache(store, "m1");
  cache.set_grains("web1", debian_grains("web1"));
  packed::document before = cache.packed_grains("web1");
  json changed = debian_grains("web1");
  changed["os"] = "Ubuntu";
  cache.set_grains("web1", changed);
  EXPECT_EQ(before.root().find("os").string(), "Debian");
  EXPECT_EQ(cache.packed_grains("web1").root().find("os").string(), "Ubuntu");
}

TEST(minion_cache, minions_handed_one_pillar_object_share_one_packed_copy) {
  store_worker store(store::open_sqlite(":memory:"));
  minion_cache cache(store, "m1");
  auto common = std::make_shared<const json>(json{{"ntp", {{"servers", {"a", "b"}}}}});
  cache.set_pillar("web1", common);
  cache.set_pillar("web2", common);
  auto other = std::make_shared<const json>(*common);
  cache.set_pillar("db1", other);
  cache.read([](const minion_cache::lookup& lookup) {
    auto text = [&](const char* id) {
      return lookup(id).pillar.find("ntp").find("servers").at(0).string().data();
    };
    EXPECT_EQ(text("web1"), text("web2"));
    EXPECT_NE(text("web1"), text("db1"));
  });
  EXPECT_EQ(pillar_of(cache, "db1"), *common);
}

TEST(minion_cache, survives_a_restart_through_the_store_and_forgets_deleted_minions) {
  test::temp_dir dir;
  const std::string db = dir.file("master.db");
  {
    store_worker store(store::open_sqlite(db));
    minion_cache cache(store, "m1");
    cache.set_grains("web1", debian_grains("web1"));
    cache.set_pillar("web1", std::make_shared<const json>(json{{"role", "web"}}));
    cache.set_grains("gone", debian_grains("gone"));
    cache.seen("web1", 1700000000, true);
    cache.flush();
    cache.forget("gone");
    store.stop();
  }
  store_worker store(store::open_sqlite(db));
  minion_cache cache(store, "m1");
  std::vector<store::minion_data_record> rows;
  store.post([&rows](store::store& s) { rows = s.load_minion_data(); });
  store.stop();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].last_seen, 1700000000);
  EXPECT_EQ(rows[0].master, "m1");
  cache.load(std::move(rows));
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.packed_grains("web1").to_json(), debian_grains("web1"));
  EXPECT_EQ(pillar_of(cache, "web1"), (json{{"role", "web"}}));
  EXPECT_FALSE(cache.packed_grains("gone"));
}

std::string master_of(const minion_cache& cache, const std::string& id) {
  std::string out;
  cache.read([&](const minion_cache::lookup& lookup) { out = lookup(id).master; });
  return out;
}

int64_t last_seen_of(const minion_cache& cache, const std::string& id) {
  int64_t out = -1;
  cache.read([&](const minion_cache::lookup& lookup) { out = lookup(id).last_seen; });
  return out;
}

TEST(minion_cache, knows_which_master_each_minion_is_connected_to) {
  test::temp_dir dir;
  store_worker store(store::open_sqlite(dir.file("master.db")));
  minion_cache cache(store, "m1");
  cache.seen("here", 1, true);
  cache.presence("m2", {"there", "moved"}, {}, 1000);
  EXPECT_EQ(master_of(cache, "here"), "m1");
  EXPECT_EQ(master_of(cache, "there"), "m2");
  // "moved" went from m2 to this master; m2 noticing it gone later changes
  // nothing.
  cache.seen("moved", 2, true);
  cache.presence("m2", {}, {"moved", "there"}, 1001);
  EXPECT_EQ(master_of(cache, "moved"), "m1");
  EXPECT_EQ(master_of(cache, "there"), "");
  cache.seen("here", 3, false);
  EXPECT_EQ(master_of(cache, "here"), "");
  EXPECT_EQ(master_of(cache, "nobody"), "");
  // When each was last seen coming or going (brine inventory's last_seen),
  // by this master or by the one the feed named.
  EXPECT_EQ(last_seen_of(cache, "here"), 3);
  EXPECT_EQ(last_seen_of(cache, "moved"), 2);
  EXPECT_EQ(last_seen_of(cache, "there"), 1001);
  EXPECT_EQ(last_seen_of(cache, "nobody"), 0);
  store.stop();
}

TEST(minion_cache, a_flush_of_many_minions_reaches_the_store_in_chunks) {
  test::temp_dir dir;
  const std::string db = dir.file("master.db");
  {
    store_worker store(store::open_sqlite(db));
    minion_cache cache(store, "m1");
    for (int i = 0; i < 150; ++i) cache.set_grains("m" + std::to_string(i), debian_grains("x"));
    cache.flush();
    store.stop();
  }
  store_worker store(store::open_sqlite(db));
  std::vector<store::minion_data_record> rows;
  store.post([&rows](store::store& s) { rows = s.load_minion_data(); });
  store.stop();
  ASSERT_EQ(rows.size(), 150u);
  for (const auto& r : rows) EXPECT_EQ(r.grains, debian_grains("x")) << r.id;
}

}  // namespace
}  // namespace brine::master
