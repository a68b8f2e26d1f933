#include "pki/key_registry.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace brine::pki {
namespace {

using store::key_state;

TEST(key_registry, unknown_minion_is_pending) {
  key_registry r({});
  auto d = r.present("m1", "PEM1", "fp1", 1);
  EXPECT_EQ(d.state, key_state::pending);
  ASSERT_EQ(d.changes.size(), 1u);
  EXPECT_EQ(d.changes[0].record.state, key_state::pending);
  EXPECT_EQ(r.present("m1", "PEM1", "fp1", 2).state, key_state::pending);
  EXPECT_TRUE(r.present("m1", "PEM1", "fp1", 2).changes.empty());
}

TEST(key_registry, auto_accept) {
  key_registry r({.auto_accept = true});
  EXPECT_EQ(r.present("m1", "PEM1", "fp1", 1).state, key_state::accepted);
  EXPECT_TRUE(r.is_accepted("m1", "fp1"));
}

TEST(key_registry, accept_then_same_key_is_accepted) {
  key_registry r({});
  r.present("m1", "PEM1", "fp1", 1);
  auto op = r.accept("m*", false, false, 2);
  EXPECT_EQ(op.ids, std::vector<std::string>{"m1"});
  EXPECT_EQ(r.present("m1", "PEM1", "fp1", 3).state, key_state::accepted);
}

TEST(key_registry, different_key_for_known_id_is_denied) {
  for (key_state known : {key_state::pending, key_state::accepted, key_state::rejected}) {
    key_registry r({});
    r.present("m1", "PEM1", "fp1", 1);
    if (known == key_state::accepted) r.accept("m1", false, false, 2);
    if (known == key_state::rejected) r.reject("m1", false, false, 2);
    auto d = r.present("m1", "PEM2", "fp2", 3);
    EXPECT_EQ(d.state, key_state::denied);
    ASSERT_EQ(d.changes.size(), 1u);
    EXPECT_EQ(d.changes[0].record.fingerprint, "fp2");
    // The known key keeps its state.
    EXPECT_EQ(r.present("m1", "PEM1", "fp1", 4).state, known);
    // Presented again, the denied key changes nothing more.
    EXPECT_TRUE(r.present("m1", "PEM2", "fp2", 5).changes.empty());
    EXPECT_EQ(r.list().size(), 2u);
  }
}

TEST(key_registry, new_keys_and_counts_per_state) {
  key_registry r({});
  EXPECT_TRUE(r.present("m1", "PEM1", "fp1", 1).new_key);
  EXPECT_FALSE(r.present("m1", "PEM1", "fp1", 2).new_key);
  EXPECT_TRUE(r.present("m2", "PEM2", "fp2", 1).new_key);
  EXPECT_TRUE(r.present("m3", "PEM3", "fp3", 1).new_key);
  r.accept("m2", false, false, 2);
  r.reject("m3", false, false, 2);
  EXPECT_FALSE(r.present("m2", "PEM2", "fp2", 3).new_key);
  // Another key for a known id: new, and denied.
  EXPECT_TRUE(r.present("m2", "PEMx", "fpx", 3).new_key);
  EXPECT_FALSE(r.present("m2", "PEMx", "fpx", 4).new_key);
  auto c = r.counts();
  EXPECT_EQ(c.pending, 1u);
  EXPECT_EQ(c.accepted, 1u);
  EXPECT_EQ(c.rejected, 1u);
  EXPECT_EQ(c.denied, 1u);
}

TEST(key_registry, rejected_never_returns_to_pending) {
  key_registry r({});
  r.present("m1", "PEM1", "fp1", 1);
  r.reject("m1", false, false, 2);
  EXPECT_EQ(r.present("m1", "PEM1", "fp1", 3).state, key_state::rejected);
  // accept without --include-rejected leaves it alone.
  EXPECT_TRUE(r.accept("m1", false, false, 4).ids.empty());
  EXPECT_EQ(r.accept("m1", true, false, 4).ids, std::vector<std::string>{"m1"});
  EXPECT_EQ(r.present("m1", "PEM1", "fp1", 5).state, key_state::accepted);
}

TEST(key_registry, reject_accepted_needs_include_accepted) {
  key_registry r({.auto_accept = true});
  r.present("m1", "PEM1", "fp1", 1);
  EXPECT_TRUE(r.reject("m1", false, false, 2).ids.empty());
  EXPECT_EQ(r.reject("m1", true, false, 2).ids, std::vector<std::string>{"m1"});
  EXPECT_FALSE(r.accepted("m1"));
}

TEST(key_registry, delete_forgets_everything_then_pending_again) {
  key_registry r({});
  r.present("m1", "PEM1", "fp1", 1);
  r.accept("m1", false, false, 2);
  r.present("m1", "PEM2", "fp2", 3);
  auto op = r.remove("m1");
  EXPECT_EQ(op.changes.size(), 2u);
  EXPECT_TRUE(r.list().empty());
  EXPECT_EQ(r.present("m1", "PEM2", "fp2", 4).state, key_state::pending);
}

TEST(key_registry, accept_denied_replaces_key) {
  key_registry r({});
  r.present("m1", "PEM1", "fp1", 1);
  r.accept("m1", false, false, 2);
  r.present("m1", "PEM2", "fp2", 3);
  auto op = r.accept("m1", false, true, 4);
  EXPECT_EQ(op.ids, std::vector<std::string>{"m1"});
  EXPECT_TRUE(r.is_accepted("m1", "fp2"));
  EXPECT_FALSE(r.is_accepted("m1", "fp1"));
  EXPECT_EQ(r.list().size(), 1u);
}

TEST(key_registry, autosign_and_autoreject_files) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / "brine-autosign-test";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "autosign") << "# trusted\nweb*\n";
  std::ofstream(dir / "autoreject") << "web-bad\n";
  key_registry r({.autosign_file = (dir / "autosign").string(),
                  .autoreject_file = (dir / "autoreject").string()});
  EXPECT_EQ(r.present("web1", "P", "f1", 1).state, key_state::accepted);
  EXPECT_EQ(r.present("web-bad", "P", "f2", 1).state, key_state::rejected);
  EXPECT_EQ(r.present("db1", "P", "f3", 1).state, key_state::pending);
  std::filesystem::remove_all(dir);
}

TEST(key_registry, load_restores_states) {
  key_registry r({});
  r.load({{"a", key_state::accepted, "P", "fa", 1},
          {"a", key_state::denied, "Q", "fq", 1},
          {"b", key_state::pending, "P", "fb", 1}});
  EXPECT_TRUE(r.is_accepted("a", "fa"));
  EXPECT_EQ(r.present("a", "Q", "fq", 2).state, key_state::denied);
  EXPECT_EQ(r.accepted_matching("*"), std::vector<std::string>{"a"});
}

// Another master accepted, rejected or deleted keys in a shared store: what
// is read back replaces what is held, and only a real difference counts.
TEST(key_registry, replace_takes_what_another_master_decided) {
  key_registry r({});
  r.written(r.present("a", "P", "fa", 1).changes);
  EXPECT_FALSE(r.replace("a", {{"a", key_state::pending, "P", "fa", 1}}));
  EXPECT_TRUE(r.replace("a", {{"a", key_state::accepted, "P", "fa", 2}}));
  EXPECT_TRUE(r.is_accepted("a", "fa"));
  EXPECT_TRUE(r.replace("a", {{"a", key_state::rejected, "P", "fa", 3}}));
  EXPECT_FALSE(r.is_accepted("a", "fa"));
  EXPECT_EQ(r.present("a", "P", "fa", 4).state, key_state::rejected);
  // Deleted there: forgotten here, so the minion is pending again.
  EXPECT_TRUE(r.replace("a", {}));
  EXPECT_TRUE(r.list().empty());
  EXPECT_FALSE(r.replace("a", {}));
  // New on the other master, with a denied key beside it.
  EXPECT_TRUE(r.replace("b", {{"b", key_state::accepted, "P", "fb", 1},
                              {"b", key_state::denied, "Q", "fq", 1}}));
  EXPECT_EQ(r.present("b", "Q", "fq", 2).state, key_state::denied);
  EXPECT_EQ(r.list().size(), 2u);
}

TEST(key_registry, reload_names_the_ids_that_differ) {
  key_registry r({});
  r.load({{"a", key_state::accepted, "P", "fa", 1},
          {"b", key_state::pending, "P", "fb", 1},
          {"c", key_state::accepted, "P", "fc", 1}});
  auto changed = r.reload({{"a", key_state::accepted, "P", "fa", 1},
                           {"b", key_state::accepted, "P", "fb", 2},
                           {"d", key_state::pending, "P", "fd", 2}});
  EXPECT_EQ(changed, (std::vector<std::string>{"b", "c", "d"}));
  EXPECT_TRUE(r.is_accepted("b", "fb"));
  EXPECT_FALSE(r.is_accepted("c", "fc"));
  EXPECT_EQ(r.accepted_matching("*"), (std::vector<std::string>{"a", "b"}));
}

// A read of the store that began before this master's own decision was
// written cannot hold it: the decision stands until written (seen: a
// cluster member that reloaded every key while accepting thousands of
// minions forgot 307 of them for good).
TEST(key_registry, decisions_not_written_yet_survive_a_reload_and_a_replace) {
  key_registry r({.auto_accept = true});
  r.load({{"old", key_state::accepted, "P", "fo", 1}});
  auto d = r.present("new", "P", "fn", 2);
  auto gone = r.remove("old");
  EXPECT_TRUE(r.reload({{"old", key_state::accepted, "P", "fo", 1},
                        {"other", key_state::accepted, "P", "ft", 2}}) ==
              std::vector<std::string>{"other"});
  EXPECT_TRUE(r.is_accepted("new", "fn"));
  EXPECT_FALSE(r.accepted("old"));
  EXPECT_FALSE(r.replace("new", {}));
  EXPECT_TRUE(r.is_accepted("new", "fn"));
  // Written: the store is the truth again.
  r.written(d.changes);
  r.written(gone.changes);
  EXPECT_TRUE(r.replace("new", {}));
  EXPECT_FALSE(r.is_accepted("new", "fn"));
  auto changed = r.reload({{"old", key_state::accepted, "P", "fo", 1}});
  EXPECT_EQ(changed, (std::vector<std::string>{"old", "other"}));
  EXPECT_TRUE(r.accepted("old"));
}

}  // namespace
}  // namespace brine::pki
