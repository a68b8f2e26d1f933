#include <gtest/gtest.h>
#include <sys/stat.h>

#include "base/config.h"
#include "base/error.h"
#include "cluster/identity.h"
#include "cluster/membership.h"
#include "support/temp_dir.h"

namespace brine::cluster {
namespace {

struct node {
  pki::keypair own = pki::keypair::generate();
  std::string name;
  self me(const pki::keypair& cluster_key, const std::string& id = "c1") {
    return {id, name, name + "-peer", &cluster_key, &own};
  }
};

store::member_record seen(store::member_record r, int64_t at) {
  r.seen_ms = at;
  return r;
}

TEST(ClusterIdentity, InitMakesTheKeyOnceAndLoadFindsIt) {
  test::temp_dir dir;
  base::master_config cfg;
  cfg.source = "/etc/brine/master";
  cfg.cluster_id = "c1";
  cfg.cluster_pki_dir = dir.path() + "/cluster";
  EXPECT_THROW(
      {
        try {
          load_key(cfg);
        } catch (const base::error& e) {
          EXPECT_NE(std::string(e.what()).find("brine cluster init -c /etc/brine/master"),
                    std::string::npos)
              << e.what();
          throw;
        }
      },
      base::error);
  auto first = init(cfg);
  EXPECT_TRUE(first.made);
  struct stat st {};
  ASSERT_EQ(::stat((cfg.cluster_pki_dir + "/cluster.pem").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto second = init(cfg);
  EXPECT_FALSE(second.made);
  EXPECT_EQ(second.fingerprint, first.fingerprint);
  EXPECT_EQ(load_key(cfg).fingerprint(), first.fingerprint);
}

TEST(ClusterIdentity, AProofHoldsOnlyForWhatWasSignedWithTheClusterKey) {
  auto key = pki::keypair::generate();
  auto other = pki::keypair::generate();
  node a{.name = "a:4506"};
  membership ma(a.me(key));
  auto row = ma.row({});
  EXPECT_TRUE(verify(key, row));
  auto forged = row;
  forged.peer = "evil:4520";
  EXPECT_FALSE(verify(key, forged));
  membership mo(a.me(other));
  EXPECT_FALSE(verify(key, mo.row({})));
  auto garbage = row;
  garbage.proof = "zz";
  EXPECT_FALSE(verify(key, garbage));
}

TEST(ClusterMembership, AliveMeansVerifiedAndHeardFromLately) {
  auto key = pki::keypair::generate();
  node a{.name = "a:4506"}, b{.name = "b:4506"}, c{.name = "c:4506"};
  membership ma(a.me(key));
  membership mb(b.me(key));
  membership mc(c.me(key));
  int64_t now = 1'000'000;
  auto problem = ma.update({seen(ma.row({}), now), seen(mb.row({}), now - 1000),
                            seen(mc.row({}), now - k_dead_after_ms - 1)},
                           now);
  EXPECT_EQ(problem, "");
  EXPECT_TRUE(ma.alive("a:4506"));
  EXPECT_TRUE(ma.alive("b:4506"));
  EXPECT_FALSE(ma.alive("c:4506"));
  EXPECT_FALSE(ma.alive("nobody:1"));
  EXPECT_EQ(ma.members().size(), 3u);
}

TEST(ClusterMembership, ALiveMasterWithAnotherClusterKeyOrIdKeepsThisOneOut) {
  auto key = pki::keypair::generate();
  auto other = pki::keypair::generate();
  node a{.name = "a:4506"}, b{.name = "b:4506"};
  membership ma(a.me(key));
  membership mb(b.me(other));
  int64_t now = 5'000'000;
  auto problem = ma.update({seen(ma.row({}), now), seen(mb.row({}), now - 100)}, now);
  EXPECT_NE(problem.find("presents cluster key " + other.fingerprint()), std::string::npos)
      << problem;
  EXPECT_NE(problem.find("copy cluster_pki_dir"), std::string::npos) << problem;
  EXPECT_FALSE(ma.alive("b:4506"));
  // Long dead: no obstacle.
  EXPECT_EQ(ma.update({seen(ma.row({}), now), seen(mb.row({}), now - 60'000)}, now), "");

  membership mx(b.me(key, "c2"));
  problem = ma.update({seen(ma.row({}), now), seen(mx.row({}), now - 100)}, now);
  EXPECT_NE(problem.find("already serves cluster 'c2'"), std::string::npos) << problem;
}

TEST(ClusterMembership, ARemovedRowIsNotAMemberAndTellsItsMaster) {
  auto key = pki::keypair::generate();
  node a{.name = "a:4506"}, b{.name = "b:4506"};
  membership ma(a.me(key));
  membership mb(b.me(key));
  int64_t now = 9'000'000;
  auto rb = seen(mb.row({}), now);
  rb.removed = true;
  EXPECT_EQ(ma.update({seen(ma.row({}), now), rb}, now), "");
  EXPECT_FALSE(ma.alive("b:4506"));
  EXPECT_FALSE(ma.removed());
  mb.update({seen(ma.row({}), now), rb}, now);
  EXPECT_TRUE(mb.removed());
}

}  // namespace
}  // namespace brine::cluster

namespace brine::cluster {
namespace {

TEST(ClusterHello, AdmitsOnlyAProvedHelloOnItsOwnKey) {
  auto key = pki::keypair::generate();
  auto own = pki::keypair::generate();
  self me{"c1", "a:4506", "a:4520", &key, &own};
  membership m(me);
  auto hello = hello_body(m.row({}));
  EXPECT_EQ(check_hello(hello, own.get(), key, "c1"), "");
  auto stranger = pki::keypair::generate();
  EXPECT_NE(check_hello(hello, stranger.get(), key, "c1").find("TLS key is not the key"),
            std::string::npos);
  EXPECT_NE(check_hello(hello, own.get(), key, "c2").find("member of cluster 'c1'"),
            std::string::npos);
  auto forged = hello;
  forged["peer"] = "evil:1";
  EXPECT_NE(check_hello(forged, own.get(), key, "c1").find("proof"), std::string::npos);
  auto other = pki::keypair::generate();
  EXPECT_NE(check_hello(hello, own.get(), other, "c1").find("holds cluster key"),
            std::string::npos);
  auto missing = hello;
  missing.erase("proof");
  EXPECT_EQ(check_hello(missing, own.get(), key, "c1"), "its hello has no proof");
  EXPECT_NE(check_hello(nlohmann::json::array(), own.get(), key, "c1"), "");
}

}  // namespace
}  // namespace brine::cluster
