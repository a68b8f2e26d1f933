// The catalog cache (interning, bounds, per-minion keys), the compile
// request and reply bodies, and the compile master's service against a
// real roots tree: the same chunks as the minion's own compile, a cache hit
// for an unchanged minion, a miss for a changed file, grain or pillar, and
// "compile on the minion" for a template that needs the minion.

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "catalog/cache.h"
#include "catalog/request.h"
#include "catalog/service.h"
#include "fileserver/roots.h"
#include "modules/registry.h"
#include "state/bridge.h"
#include "state/highstate.h"
#include "state/state_mod.h"
#include "support/temp_dir.h"

namespace brine::catalog {
namespace {

using test::temp_dir;

TEST(CatalogCache, MissThenHitAndCounts) {
  cache c(1 << 20);
  EXPECT_EQ(c.get("k1"), nullptr);
  c.put("m1", "k1", "catalog-a");
  auto hit = c.get("k1");
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(*hit, "catalog-a");
  auto f = c.counts();
  EXPECT_EQ(f.hits, 1u);
  EXPECT_EQ(f.misses, 1u);
  EXPECT_EQ(f.keys, 1u);
  EXPECT_EQ(f.bytes, 9u + cache::k_key_overhead);
}

TEST(CatalogCache, SameContentIsKeptOnce) {
  cache c(1 << 20);
  std::string catalog(10000, 'x');
  for (int i = 0; i < 100; ++i) {
    c.put("m" + std::to_string(i), "k" + std::to_string(i), catalog);
  }
  auto f = c.counts();
  EXPECT_EQ(f.keys, 100u);
  EXPECT_EQ(f.catalogs, 1u);
  EXPECT_EQ(f.bytes, 10000u + 100 * cache::k_key_overhead);
}

TEST(CatalogCache, BoundedByBytesOldestOut) {
  cache c(3 * (1000 + cache::k_key_overhead));
  for (int i = 0; i < 5; ++i) {
    c.put("m" + std::to_string(i), "k" + std::to_string(i), std::string(1000, char('a' + i)));
  }
  auto f = c.counts();
  EXPECT_EQ(f.keys, 3u);
  EXPECT_EQ(f.evictions, 2u);
  EXPECT_LE(f.bytes, 3 * (1000 + cache::k_key_overhead));
  EXPECT_EQ(c.get("k0"), nullptr);
  EXPECT_EQ(c.get("k1"), nullptr);
  EXPECT_NE(c.get("k4"), nullptr);
}

TEST(CatalogCache, RecentUseKeepsAnEntry) {
  cache c(2 * (100 + cache::k_key_overhead));
  c.put("a", "ka", std::string(100, 'a'));
  c.put("b", "kb", std::string(100, 'b'));
  ASSERT_NE(c.get("ka"), nullptr);  // ka is now the newest
  c.put("c", "kc", std::string(100, 'c'));
  EXPECT_NE(c.get("ka"), nullptr);
  EXPECT_EQ(c.get("kb"), nullptr);
}

TEST(CatalogCache, AMinionKeepsAFewKeys) {
  cache c(1 << 20);
  for (size_t i = 0; i < cache::k_keys_per_minion + 2; ++i) {
    c.put("m", "k" + std::to_string(i), "catalog" + std::to_string(i));
  }
  EXPECT_EQ(c.counts().keys, cache::k_keys_per_minion);
  EXPECT_EQ(c.get("k0"), nullptr);
  EXPECT_NE(c.get("k" + std::to_string(cache::k_keys_per_minion + 1)), nullptr);
}

TEST(CatalogCache, ZeroBytesKeepsNothing) {
  cache c(0);
  c.put("m", "k", "x");
  EXPECT_EQ(c.get("k"), nullptr);
}

request sample_request() {
  request r;
  r.fun = "state.apply";
  r.mods = "web";
  r.grains = {{"id", "m1"}, {"os", "Debian"}};
  r.pillar = ordered_json::object();
  r.pillar["z"] = 1;
  r.pillar["a"] = 2;
  r.opts = {{"id", "m1"}};
  r.jid = "20261128000000000000";
  return r;
}

TEST(CatalogRequest, BodyRoundTripKeepsPillarOrder) {
  request r = sample_request();
  std::string why;
  auto back = request_from_body(to_body(r), why);
  ASSERT_TRUE(back) << why;
  EXPECT_EQ(back->mods, r.mods);
  EXPECT_EQ(back->saltenv, std::nullopt);
  EXPECT_EQ(back->grains, r.grains);
  EXPECT_EQ(back->pillar.dump(), R"({"z":1,"a":2})");
  EXPECT_EQ(back->jid, r.jid);
}

TEST(CatalogRequest, MalformedBodiesNameTheField) {
  std::string why;
  EXPECT_FALSE(request_from_body(json::array(), why));
  EXPECT_EQ(why, "the body is not a map");
  json b = to_body(sample_request());
  b["grains"] = "x";
  EXPECT_FALSE(request_from_body(b, why));
  EXPECT_EQ(why, "'grains' is not a map");
  b = to_body(sample_request());
  b["pillar"] = json::object();
  EXPECT_FALSE(request_from_body(b, why));
  EXPECT_EQ(why, "'pillar' is not MessagePack bytes of a map");
  b = to_body(sample_request());
  b["mods"] = 3;
  EXPECT_FALSE(request_from_body(b, why));
  EXPECT_EQ(why, "'mods' is not a string");
}

TEST(CatalogRequest, KeyChangesWithEachInputButNotTheJid) {
  std::map<std::string, std::string> revs{{"base", "r1"}};
  request r = sample_request();
  std::string k = key_of(r, revs);
  request same = r;
  same.jid = "other";
  EXPECT_EQ(key_of(same, revs), k);
  EXPECT_NE(key_of(r, {{"base", "r2"}}), k);
  request g = r;
  g.grains["os"] = "Ubuntu";
  EXPECT_NE(key_of(g, revs), k);
  request p = r;
  p.pillar["a"] = 3;
  EXPECT_NE(key_of(p, revs), k);
  request order = r;
  order.pillar = ordered_json::object();
  order.pillar["a"] = 2;
  order.pillar["z"] = 1;
  EXPECT_NE(key_of(order, revs), k);  // templates iterate the pillar in its order
  request m = r;
  m.mods = "db";
  EXPECT_NE(key_of(m, revs), k);
  request e = r;
  e.exclude = json::array({"x"});
  EXPECT_NE(key_of(e, revs), k);
}

TEST(CatalogReply, BodiesRoundTrip) {
  reply r;
  r.chunks = ordered_json::array({{{"state", "file"}, {"__id__", "x"}}});
  r.files.push_back({"base", "web/index.html", "abc", 3, 0644});
  std::string why;
  auto back = reply_from_body(to_body(r), why);
  ASSERT_TRUE(back) << why;
  EXPECT_EQ(back->what, reply::kind::chunks);
  EXPECT_EQ(back->chunks, r.chunks);
  ASSERT_EQ(back->files.size(), 1u);
  EXPECT_EQ(back->files[0].path, "web/index.html");
  reply m;
  m.what = reply::kind::minion;
  m.reason = "why";
  back = reply_from_body(to_body(m), why);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->reason, "why");
  EXPECT_FALSE(reply_from_body(json{{"kind", "other"}}, why));
  EXPECT_EQ(why, "'kind' is not chunks, errors, no_top or minion");
}

TEST(CatalogReply, FilesNamedByChunks) {
  ordered_json chunks = ordered_json::parse(R"([
    {"__env__": "base", "__id__": "a", "source": "salt://web/a.conf", "name": "/a"},
    {"__env__": "dev", "__id__": "b", "sources": ["salt://b.txt", "salt://web/a.conf?saltenv=base"]},
    {"__env__": "base", "__id__": "c", "name": "/c", "contents": "not salt://"}
  ])");
  auto named = files_named(chunks);
  ASSERT_EQ(named.size(), 2u);
  EXPECT_EQ(named[0], (std::pair<std::string, std::string>{"base", "web/a.conf"}));
  EXPECT_EQ(named[1], (std::pair<std::string, std::string>{"dev", "b.txt"}));
}

TEST(CatalogPlacement, DataFunctionsRunOnTheMasterOthersOnTheMinion) {
  EXPECT_TRUE(runs_on_master("pillar.get"));
  EXPECT_TRUE(runs_on_master("grains.filter_by"));
  EXPECT_TRUE(runs_on_master("config.get"));
  EXPECT_TRUE(runs_on_master("test.ping"));
  EXPECT_FALSE(runs_on_master("test.sleep"));
  EXPECT_FALSE(runs_on_master("test.random_hash"));
  EXPECT_FALSE(runs_on_master("grains.setval"));
  EXPECT_FALSE(runs_on_master("cmd.run"));
  EXPECT_FALSE(runs_on_master("file.file_exists"));
  EXPECT_FALSE(runs_on_master("pkg.version"));
}

void write(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

class CatalogService : public ::testing::Test {
 protected:
  CatalogService() : roots_({{"base", {tree_.path() + "/roots"}}}, std::chrono::milliseconds(0)) {
    write(root("top.sls"), "base:\n  '*':\n    - web\n");
    write(root("web/init.sls"),
          "{% set port = pillar.get('port', 80) %}\n"
          "web_conf:\n  file.managed:\n    - name: /tmp/web-{{ grains['os'] }}.conf\n"
          "    - source: salt://web/files/web.conf\n    - template: jinja\n"
          "    - context:\n        port: {{ port }}\n"
          "web_dir:\n  file.directory:\n    - name: /tmp/web\n    - require:\n"
          "      - file: web_conf\n");
    write(root("web/files/web.conf"), "port={{ port }}\n");
    settings s;
    s.tree_dir = tree_.path() + "/tree";
    s.threads = 1;
    service_ = std::make_unique<service>(s, roots_);
  }
  std::string root(const std::string& rel) const { return tree_.path() + "/roots/" + rel; }

  request highstate() const {
    request r;
    r.fun = "state.apply";
    r.grains = {{"id", "m1"}, {"os", "Debian"}};
    r.pillar = ordered_json::object();
    r.pillar["port"] = 8080;
    r.opts = {{"id", "m1"}, {"file_client", "remote"}};
    return r;
  }

  // The chunks the minion's own compile makes (state.apply's), from the
  // roots in place with the minion's full function table.
  ordered_json minion_side(const request& r) {
    modules::registry functions;
    modules::register_builtin_modules(functions);
    state::options o = state::options::from_opts(r.opts);
    o.file_roots = {{"base", {tree_.path() + "/roots"}}};
    state::minion m;
    m.id = "m1";
    m.grains = state::json(r.grains);
    m.pillar = r.pillar;
    m.opts = state::json(r.opts);
    state::compiler comp(o, std::move(m));
    comp.set_salt(state::make_salt(comp, functions, nullptr));
    auto plan = comp.plan(r.mods, r.saltenv, state::json());
    EXPECT_TRUE(plan.errors.is_null()) << plan.errors.dump();
    return plan.chunks;
  }

  reply compiled(const request& r, bool* hit = nullptr) {
    auto a = service_->compile_now("m1", r);
    if (hit) *hit = a.hit;
    std::string why;
    auto out = reply_from_body(a.body, why);
    EXPECT_TRUE(out) << why;
    return out.value_or(reply{});
  }

  temp_dir tree_;
  fileserver::roots roots_;
  std::unique_ptr<service> service_;
};

TEST_F(CatalogService, TheSameChunksAsTheMinionsOwnCompile) {
  request r = highstate();
  reply out = compiled(r);
  ASSERT_EQ(out.what, reply::kind::chunks);
  EXPECT_EQ(out.chunks.dump(), minion_side(r).dump());
  ASSERT_EQ(out.files.size(), 1u);
  EXPECT_EQ(out.files[0].path, "web/files/web.conf");
  EXPECT_EQ(out.files[0].hash, *fileserver::hash_file(root("web/files/web.conf")));
}

TEST_F(CatalogService, AnUnchangedMinionIsAHitAChangeIsAMiss) {
  request r = highstate();
  bool hit = true;
  compiled(r, &hit);
  EXPECT_FALSE(hit);
  reply again = compiled(r, &hit);
  EXPECT_TRUE(hit);
  EXPECT_TRUE(again.cached);
  EXPECT_EQ(service_->cache_counts().hits, 1u);

  request grain = r;
  grain.grains["os"] = "Ubuntu";
  reply changed = compiled(grain, &hit);
  EXPECT_FALSE(hit);
  EXPECT_NE(changed.chunks.dump().find("/tmp/web-Ubuntu.conf"), std::string::npos);

  request pillar = r;
  pillar.pillar["port"] = 9090;
  reply p = compiled(pillar, &hit);
  EXPECT_FALSE(hit);
  EXPECT_NE(p.chunks.dump().find("9090"), std::string::npos);

  // A file of the tree changes: its revision does, and so does the key.
  write(root("web/init.sls"), "web_dir:\n  file.directory:\n    - name: /tmp/web2\n");
  reply f = compiled(r, &hit);
  EXPECT_FALSE(hit);
  EXPECT_NE(f.chunks.dump().find("/tmp/web2"), std::string::npos);
  EXPECT_EQ(f.chunks.dump(), minion_side(r).dump());
}

TEST_F(CatalogService, ATemplateThatNeedsTheMinionIsCompiledThere) {
  write(root("web/init.sls"),
        "{% if salt['file.file_exists']('/etc/hosts') %}\nx:\n  test.nop\n{% endif %}\n");
  reply out = compiled(highstate());
  ASSERT_EQ(out.what, reply::kind::minion);
  EXPECT_EQ(out.reason, "a template calls file.file_exists, which runs on the minion");
  bool hit = false;
  reply again = compiled(highstate(), &hit);
  EXPECT_TRUE(hit);
  EXPECT_EQ(again.what, reply::kind::minion);
}

TEST_F(CatalogService, CompileErrorsAreTheMinionsErrors) {
  write(root("web/init.sls"), "bad:\n  - this is not a state\n  : [\n");
  reply out = compiled(highstate());
  ASSERT_EQ(out.what, reply::kind::errors);
  ASSERT_FALSE(out.errors.empty());
  EXPECT_NE(out.errors[0].get<std::string>().find("web"), std::string::npos) << out.errors.dump();
}

TEST_F(CatalogService, NoTopMatchSaysSo) {
  write(root("top.sls"), "base:\n  'other':\n    - web\n");
  EXPECT_EQ(compiled(highstate()).what, reply::kind::no_top);
}

TEST_F(CatalogService, CompilesOnItsPoolAndCountsWhatIsInFlight) {
  std::mutex mu;
  std::condition_variable cv;
  int done = 0;
  for (int i = 0; i < 4; ++i) {
    service_->compile("m1", highstate(), [&](service::answer a) {
      EXPECT_EQ(a.body.value("kind", ""), "chunks");
      std::lock_guard lock(mu);
      ++done;
      cv.notify_all();
    });
  }
  std::unique_lock lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return done == 4; }));
  EXPECT_EQ(service_->in_flight(), 0u);
  auto f = service_->cache_counts();
  EXPECT_EQ(f.hits + f.misses, 4u);
  EXPECT_GE(f.hits, 3u);  // one pool thread: the first compiles, the rest hit
}

}  // namespace
}  // namespace brine::catalog
