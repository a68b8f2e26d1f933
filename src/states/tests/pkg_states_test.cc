// pkg and pkgrepo states against this machine's dpkg database and a local
// apt repository (tests/support/apt_repo.sh) that apt sees alone through
// APT_CONFIG: packages are installed, upgraded, held and removed for real,
// with no network, and purged again when a test ends, also when it fails.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "states/tests/state_fixture.h"
#include "support/apt_repo.h"

namespace brine::states {
namespace {

const char* const k_pkg = "brine-test-statepkg";
const char* const k_other = "brine-test-stateother";

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool held(const std::string& pkg) {
  std::string cmd = "dpkg --get-selections " + pkg + " 2>/dev/null | grep -q 'hold$'";
  return std::system(cmd.c_str()) == 0;
}

class pkg_states_test : public state_fixture {
 protected:
  void SetUp() override {
    if (::access("/usr/bin/apt-ftparchive", X_OK) != 0) {
      GTEST_SKIP() << "needs apt-ftparchive (Debian package apt-utils; scripts/deps.sh installs it)";
    }
  }
  static bool root() { return ::geteuid() == 0; }
};

#define NEEDS_ROOT()                                                                    \
  if (!root()) GTEST_SKIP() << "needs root: installs and removes packages with apt-get " \
                               "and dpkg (CI runs as root)"

TEST_F(pkg_states_test, installed_test_mode_install_and_idempotence) {
  NEEDS_ROOT();
  test::local_apt_repo repo({std::string(k_pkg) + "=1.0"});
  json low = {{"name", k_pkg}};

  json t = call("pkg.installed", low, true);
  EXPECT_TRUE(t["result"].is_null()) << t.dump();
  EXPECT_EQ(t["comment"], std::string("The following packages would be installed/updated: ") + k_pkg);
  EXPECT_EQ(t["changes"], (json{{k_pkg, {{"new", "installed"}, {"old", ""}}}}));
  EXPECT_EQ(test::dpkg_version(k_pkg), "") << "test mode installed it";

  json r = call("pkg.installed", low);
  EXPECT_EQ(r["result"], true) << r.dump();
  EXPECT_EQ(r["comment"], std::string("The following packages were installed/updated: ") + k_pkg);
  EXPECT_EQ(r["changes"], (json{{k_pkg, {{"old", ""}, {"new", "1.0"}}}}));
  EXPECT_EQ(test::dpkg_version(k_pkg), "1.0");

  json again = call("pkg.installed", low);
  EXPECT_EQ(again["result"], true);
  EXPECT_EQ(again["comment"], "All specified packages are already installed");
  EXPECT_EQ(again["changes"], json::object());
  json again_test = call("pkg.installed", low, true);
  EXPECT_EQ(again_test["result"], true) << "nothing to do is True under test too";
}

TEST_F(pkg_states_test, installed_pins_versions_and_takes_comparisons) {
  NEEDS_ROOT();
  test::local_apt_repo repo({std::string(k_pkg) + "=1.0", std::string(k_pkg) + "=2.0"});
  json r = call("pkg.installed", {{"name", k_pkg}, {"version", "1.0"}});
  EXPECT_EQ(r["result"], true) << r.dump();
  // Salt lists them only when the list is shorter than 20 characters.
  EXPECT_EQ(r["comment"], "1 targeted package was installed/updated.");
  EXPECT_EQ(test::dpkg_version(k_pkg), "1.0");

  json same = call("pkg.installed", {{"name", k_pkg}, {"version", "1.0"}, {"refresh", false}});
  EXPECT_EQ(same["comment"],
            "All specified packages are already installed and are at the desired version");

  json up = call("pkg.installed", {{"name", k_pkg}, {"version", ">=2.0"}, {"refresh", false}});
  EXPECT_EQ(up["result"], true) << up.dump();
  EXPECT_EQ(up["changes"], (json{{k_pkg, {{"old", "1.0"}, {"new", "2.0"}}}}));
  EXPECT_EQ(test::dpkg_version(k_pkg), "2.0");
  json up_again =
      call("pkg.installed", {{"name", k_pkg}, {"version", ">=1.5"}, {"refresh", false}});
  EXPECT_EQ(up_again["comment"],
            "All specified packages are already installed and are at the desired version");

  // pkgs with a mapping, a downgrade by comparison, and one that nothing offers.
  json down = call("pkg.installed",
                   {{"name", "x"}, {"pkgs", {{{k_pkg, "<2.0"}}}}, {"refresh", false}});
  EXPECT_EQ(down["result"], true) << down.dump();
  EXPECT_EQ(test::dpkg_version(k_pkg), "1.0");
  json none = call("pkg.installed", {{"name", k_pkg}, {"version", ">=3"}, {"refresh", false}});
  EXPECT_EQ(none["result"], false);
  EXPECT_NE(none["comment"].get<std::string>().find("No version matching '" + std::string(k_pkg) +
                                                    ">=3' could be found (available: "),
            std::string::npos)
      << none.dump();
}

TEST_F(pkg_states_test, latest_upgrades_when_the_repository_gains_a_version) {
  NEEDS_ROOT();
  test::local_apt_repo repo({std::string(k_pkg) + "=1.0"});
  json low = {{"name", k_pkg}};
  json first = call("pkg.latest", low);
  EXPECT_EQ(first["result"], true) << first.dump();
  EXPECT_EQ(first["comment"],
            std::string("The following packages were successfully installed/upgraded: ") + k_pkg);
  EXPECT_EQ(first["changes"], (json{{k_pkg, {{"old", ""}, {"new", "1.0"}}}}));
  json same = call("pkg.latest", low);
  EXPECT_EQ(same["result"], true);
  EXPECT_EQ(same["comment"], std::string("Package ") + k_pkg + " is already up-to-date");

  repo.add({std::string(k_pkg) + "=2.0"});
  json t = call("pkg.latest", low, true);
  EXPECT_TRUE(t["result"].is_null()) << t.dump();
  EXPECT_EQ(t["comment"],
            std::string("The following packages would be installed/upgraded: ") + k_pkg);
  EXPECT_EQ(test::dpkg_version(k_pkg), "1.0");
  json up = call("pkg.latest", low);
  EXPECT_EQ(up["result"], true) << up.dump();
  EXPECT_EQ(up["changes"], (json{{k_pkg, {{"old", "1.0"}, {"new", "2.0"}}}}));
  EXPECT_EQ(test::dpkg_version(k_pkg), "2.0");

  json missing = call("pkg.latest", {{"name", "brine-test-nosuch"}, {"refresh", false}});
  EXPECT_EQ(missing["result"], false);
  EXPECT_EQ(missing["comment"], "No information found for 'brine-test-nosuch'.");
}

TEST_F(pkg_states_test, uptodate_upgrades_everything_apt_offers) {
  NEEDS_ROOT();
  test::local_apt_repo repo({std::string(k_pkg) + "=1.0"});
  ASSERT_EQ(call("pkg.installed", {{"name", k_pkg}})["result"], true);
  repo.add({std::string(k_pkg) + "=2.0"});
  json t = call("pkg.uptodate", {{"name", "up"}, {"refresh", true}}, true);
  EXPECT_TRUE(t["result"].is_null()) << t.dump();
  EXPECT_EQ(t["comment"], "System update will be performed");
  ASSERT_TRUE(t["changes"].contains(k_pkg)) << t.dump();
  EXPECT_EQ(t["changes"][k_pkg], (json{{"new", "2.0"}, {"old", "1.0"}}));
  // Only what the repository offers: the machine's other packages have no
  // candidates in this apt configuration.
  json r = call("pkg.uptodate", {{"name", "up"}, {"pkgs", {k_pkg}}});
  EXPECT_EQ(r["result"], true) << r.dump();
  EXPECT_EQ(r["comment"], "Upgrade ran successfully");
  EXPECT_EQ(test::dpkg_version(k_pkg), "2.0");
  json again = call("pkg.uptodate", {{"name", "up"}, {"pkgs", {k_pkg}}});
  EXPECT_EQ(again["comment"], "System is already up-to-date");
  EXPECT_EQ(call("pkg.uptodate", {{"name", "up"}, {"refresh", "yes"}})["comment"],
            "refresh must be either True or False");
}

TEST_F(pkg_states_test, hold_keeps_a_package_and_unheld_lets_it_go) {
  NEEDS_ROOT();
  test::local_apt_repo repo({std::string(k_pkg) + "=1.0"});
  json r = call("pkg.installed", {{"name", k_pkg}, {"version", "1.0"}, {"hold", true}});
  EXPECT_EQ(r["result"], true) << r.dump();
  EXPECT_EQ(r["comment"], std::string("1 targeted package was installed/updated.\nPackage ") +
                              k_pkg + " is now being held.");
  EXPECT_EQ(r["changes"], (json{{k_pkg, {{"old", "install"}, {"new", "1.0\nhold"}}}}));
  EXPECT_TRUE(held(k_pkg));

  json again =
      call("pkg.installed", {{"name", k_pkg}, {"version", "1.0"}, {"hold", true}, {"refresh", false}});
  EXPECT_EQ(again["result"], true);
  EXPECT_EQ(again["comment"],
            std::string("All specified packages are already installed and are at the desired "
                        "version.\nPackage ") +
                k_pkg + " is already set to be held.");
  EXPECT_EQ(again["changes"], json::object());

  // A held package is let go for an explicit upgrade and held again.
  repo.add({std::string(k_pkg) + "=2.0"});
  json up = call("pkg.installed", {{"name", k_pkg}, {"version", "2.0"}, {"hold", true}});
  EXPECT_EQ(up["result"], true) << up.dump();
  EXPECT_EQ(test::dpkg_version(k_pkg), "2.0");
  EXPECT_TRUE(held(k_pkg));

  json held_again = call("pkg.held", {{"name", k_pkg}});
  EXPECT_EQ(held_again["comment"], "No changes made");
  json unheld_test = call("pkg.unheld", {{"name", k_pkg}}, true);
  EXPECT_EQ(unheld_test["comment"], std::string("The following package would be unheld: ") + k_pkg);
  EXPECT_TRUE(held(k_pkg));
  json unheld = call("pkg.unheld", {{"name", k_pkg}});
  EXPECT_EQ(unheld["result"], true) << unheld.dump();
  EXPECT_EQ(unheld["comment"], std::string("Package ") + k_pkg + " is no longer being held.");
  EXPECT_EQ(unheld["changes"][k_pkg]["changes"], (json{{"new", "install"}, {"old", "hold"}}));
  EXPECT_FALSE(held(k_pkg));
  json hold_test = call("pkg.held", {{"name", k_pkg}}, true);
  EXPECT_EQ(hold_test["comment"], std::string("The following package would be held: ") + k_pkg);
  json hold = call("pkg.held", {{"name", k_pkg}});
  EXPECT_EQ(hold["comment"], std::string("Package ") + k_pkg + " is now being held");
  EXPECT_TRUE(held(k_pkg));
}

TEST_F(pkg_states_test, removed_and_purged) {
  NEEDS_ROOT();
  test::local_apt_repo repo({std::string(k_pkg) + "=1.0", std::string(k_other) + "=1.0"});
  ASSERT_EQ(call("pkg.installed", {{"name", "both"}, {"pkgs", {k_pkg, k_other}}})["result"], true);
  ASSERT_EQ(test::dpkg_version(k_other), "1.0");

  json t = call("pkg.removed", {{"name", k_pkg}}, true);
  EXPECT_TRUE(t["result"].is_null());
  EXPECT_EQ(t["comment"], std::string("The following packages will be removed: ") + k_pkg + ".");
  EXPECT_EQ(t["changes"], (json{{k_pkg, {{"new", "removed"}, {"old", ""}}}}));
  EXPECT_EQ(test::dpkg_version(k_pkg), "1.0");

  json wrong = call("pkg.removed", {{"name", k_pkg}, {"version", "2.0"}});
  EXPECT_EQ(wrong["comment"],
            "All specified packages (matching specified versions) are already absent");
  EXPECT_EQ(test::dpkg_version(k_pkg), "1.0");

  json r = call("pkg.removed", {{"name", k_pkg}});
  EXPECT_EQ(r["result"], true) << r.dump();
  EXPECT_EQ(r["comment"], "All targeted packages were removed.");
  EXPECT_EQ(r["changes"], (json{{k_pkg, {{"old", "1.0"}, {"new", ""}}}}));
  EXPECT_EQ(test::dpkg_version(k_pkg), "");
  EXPECT_EQ(call("pkg.removed", {{"name", k_pkg}})["comment"],
            "All specified packages are already absent");

  json p = call("pkg.purged", {{"name", "x"}, {"pkgs", {k_pkg, k_other}}});
  EXPECT_EQ(p["result"], true) << p.dump();
  EXPECT_EQ(p["comment"], std::string("The following packages were not installed: ") + k_pkg +
                              " The following packages were purged: " + k_other + ".");
  EXPECT_EQ(p["changes"]["installed"], (json{{k_other, {{"old", "1.0"}, {"new", ""}}}}));
  EXPECT_EQ(test::dpkg_version(k_other), "");
  EXPECT_EQ(call("pkg.purged", {{"name", k_other}})["comment"],
            "None of the targeted packages are installed or partially installed");
}

TEST_F(pkg_states_test, installed_reports_apts_failure) {
  NEEDS_ROOT();
  test::local_apt_repo repo({std::string(k_pkg) + "=1.0"});
  json r = call("pkg.installed", {{"name", "brine-test-nosuch"}});
  EXPECT_EQ(r["result"], false);
  // Salt's CommandExecutionError text without its changes block.
  EXPECT_EQ(r["comment"],
            "Problem encountered installing package(s). Additional info follows:\n\nerrors:\n"
            "    - E: Unable to locate package brine-test-nosuch")
      << r.dump();
  EXPECT_EQ(r["changes"], json::object());
  EXPECT_EQ(r.begin().key(), "name");
  EXPECT_EQ(std::next(r.begin()).key(), "result") << "Salt's key order for this return";
  EXPECT_EQ(call("pkg.installed", {{"name", k_pkg}, {"pkgs", json::array()}})["comment"],
            "No packages to install provided");
}

TEST_F(pkg_states_test, mod_watch_runs_the_state_function_again) {
  json r = call("pkg.mod_watch", {{"name", k_pkg}, {"sfun", "uptodate"}});
  EXPECT_EQ(r["result"], false);
  EXPECT_EQ(r["comment"], "pkg.uptodate does not work with the watch requisite");
}

// pkgrepo needs no root: the sources files are the temporary ones that
// APT_CONFIG names (Dir::Etc::SourceList and SourceParts).
TEST_F(pkg_states_test, pkgrepo_managed_and_absent_in_a_sources_file) {
  test::local_apt_repo repo({std::string(k_pkg) + "=1.0"});
  const std::string existing = "deb [trusted=yes] file:" + repo.dir() + "/repo ./";
  json same = call("pkgrepo.managed", {{"name", existing}});
  EXPECT_EQ(same["result"], true) << same.dump();
  EXPECT_EQ(same["comment"], "Package repo '" + existing + "' already configured");

  const std::string line = "deb [arch=amd64] http://deb.brine.invalid/debian bookworm main";
  const std::string file = repo.file("sources.list.d/extra.list");
  json low = {{"name", line}, {"file", file}, {"comments", "extra repo"}, {"refresh", false}};
  json t = call("pkgrepo.managed", low, true);
  EXPECT_TRUE(t["result"].is_null()) << t.dump();
  EXPECT_EQ(t["changes"], (json{{"repo", line}}));
  EXPECT_TRUE(t["comment"].get<std::string>().starts_with("Package repo '" + line +
                                                          "' would be configured."));
  EXPECT_FALSE(std::filesystem::exists(file));

  json r = call("pkgrepo.managed", low);
  EXPECT_EQ(r["result"], true) << r.dump();
  EXPECT_EQ(r["comment"], "Configured package repo '" + line + "'");
  EXPECT_EQ(r["changes"], (json{{"repo", line}}));
  EXPECT_EQ(slurp(file), line + " #extra repo\n");
  json again = call("pkgrepo.managed", low);
  EXPECT_EQ(again["comment"], "Package repo '" + line + "' already configured") << again.dump();

  json off = low;
  off["disabled"] = true;
  json d = call("pkgrepo.managed", off);
  EXPECT_EQ(d["result"], true) << d.dump();
  EXPECT_EQ(d["changes"]["disabled"], (json{{"new", true}, {"old", false}}));
  EXPECT_EQ(slurp(file), "# " + line + " #extra repo\n");
  EXPECT_EQ(call("pkgrepo.managed", off)["comment"],
            "Package repo '" + line + "' already configured");

  json arch = low;
  arch["architectures"] = "amd64,arm64";
  json a = call("pkgrepo.managed", arch);
  EXPECT_EQ(a["changes"]["architectures"], (json{{"new", {"amd64", "arm64"}}, {"old", {"amd64"}}}));
  EXPECT_EQ(slurp(file),
            "deb [arch=amd64,arm64] http://deb.brine.invalid/debian bookworm main #extra repo\n");

  const std::string arch_line =
      "deb [arch=amd64,arm64] http://deb.brine.invalid/debian bookworm main";
  json gone_test = call("pkgrepo.absent", {{"name", arch_line}}, true);
  EXPECT_TRUE(gone_test["result"].is_null()) << gone_test.dump();
  EXPECT_TRUE(std::filesystem::exists(file));
  EXPECT_EQ(call("pkgrepo.absent", {{"name", line}})["comment"],
            "Package repo " + line + " is absent")
      << "the architectures differ";
  json gone = call("pkgrepo.absent", {{"name", arch_line}, {"refresh", false}});
  EXPECT_EQ(gone["result"], true) << gone.dump();
  EXPECT_EQ(gone["comment"], "Removed repo " + arch_line);
  EXPECT_EQ(gone["changes"], (json{{"repo", arch_line}}));
  EXPECT_FALSE(std::filesystem::exists(file)) << "an emptied sources.list.d file is deleted";
  EXPECT_EQ(call("pkgrepo.absent", {{"name", arch_line}})["comment"],
            "Package repo " + arch_line + " is absent");
  EXPECT_NE(slurp(repo.file("sources.list")).find(existing), std::string::npos);

  // A keyring from key_url, without apt-key, at the signed-by path.
  std::ofstream(repo.file("key.gpg")) << "not really a key\n";
  const std::string keyring = repo.file("keyrings/extra.gpg");
  const std::string signed_line =
      "deb [signed-by=" + keyring + "] http://deb.brine.invalid/debian bookworm contrib";
  json k = call("pkgrepo.managed", {{"name", signed_line},
                                    {"file", file},
                                    {"key_url", "file://" + repo.file("key.gpg")},
                                    {"aptkey", false},
                                    {"refresh", false}});
  EXPECT_EQ(k["result"], true) << k.dump();
  EXPECT_EQ(slurp(keyring), "not really a key\n");
  EXPECT_EQ(slurp(file), signed_line + "\n");
  EXPECT_EQ(call("pkgrepo.managed", {{"name", signed_line}, {"file", file}, {"aptkey", false}})
                ["comment"],
            "Package repo '" + signed_line + "' already configured");
  json bad = call("pkgrepo.managed", {{"name", "deb http://x.invalid/ y z"},
                                      {"aptkey", false},
                                      {"refresh", false}});
  EXPECT_EQ(bad["result"], false);
  EXPECT_EQ(bad["comment"], "Failed to configure repo 'deb http://x.invalid/ y z': missing "
                            "'signedby' option when apt-key is missing");
  EXPECT_EQ(call("pkgrepo.absent", {{"name", signed_line}, {"refresh", false}})["result"], true);
  EXPECT_FALSE(std::filesystem::exists(file));

  EXPECT_EQ(call("pkgrepo.managed", {{"name", line}, {"repo", line}})["result"], false);
  EXPECT_EQ(call("pkgrepo.managed", {{"name", line}, {"enabled", true}, {"disabled", true}})
                ["comment"],
            "Only one of enabled/disabled is allowed");
}

}  // namespace
}  // namespace brine::states
