// Tests of the pkg module against this machine's dpkg database. Read-only
// functions use packages every Debian system has (dpkg, bash); what is
// installed and removed comes from a local repository the test builds.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/error.h"
#include "modules/process.h"
#include "modules/registry.h"
#include "modules/tests/test_util.h"
#include "support/temp_dir.h"

namespace brine::modules {
namespace {

using namespace testing;
using json = nlohmann::json;

// The version dpkg has installed, or "" (also for a package removed with
// its configuration files left).
std::string installed_version(const std::string& pkg) {
  process_result r = run_argv({"dpkg-query", "-W", "-f", "${Status}\t${Version}", pkg});
  const std::string installed = "ok installed\t";
  auto at = r.stdout_text.find(installed);
  if (r.retcode != 0 || at == std::string::npos) return "";
  return r.stdout_text.substr(at + installed.size());
}

bool version_greater(const std::string& a, const std::string& b) {
  return run_argv({"dpkg", "--compare-versions", a, "gt", b}).retcode == 0;
}

const std::string k_missing = "brine-no-such-package-" + std::to_string(::getpid());

// A package operation may download: a long job limit.
class pkg_mod_test : public module_test {
 protected:
  pkg_mod_test() : module_test(register_pkg_module, 600s, 900s) {}
};

TEST_F(pkg_mod_test, every_function_is_registered_with_a_cli_example) {
  for (const char* fun : {"pkg.list_pkgs", "pkg.version", "pkg.latest_version", "pkg.install",
                          "pkg.remove", "pkg.purge", "pkg.refresh_db", "pkg.upgrade", "pkg.hold",
                          "pkg.unhold", "pkg.get_selections", "pkg.list_upgrades",
                          "pkg.upgrade_available", "pkg.version_cmp", "pkg.list_repo_pkgs"}) {
    ASSERT_NE(reg_.find(fun), nullptr) << fun;
    EXPECT_NE(reg_.doc(fun).find("brine cmd '*' " + std::string(fun)), std::string::npos)
        << fun << ": " << reg_.doc(fun);
    EXPECT_TRUE(reg_.doc(fun).starts_with(fun)) << reg_.doc(fun);
  }
}

TEST_F(pkg_mod_test, list_pkgs_matches_dpkg) {
  const std::string bash = installed_version("bash");
  ASSERT_FALSE(bash.empty());
  outcome o = call_fn(make_call("pkg.list_pkgs"));
  ASSERT_TRUE(o.success) << o.ret.dump();
  ASSERT_TRUE(o.ret.is_object());
  EXPECT_EQ(o.ret.value("bash", ""), bash);
  EXPECT_EQ(o.ret.value("dpkg", ""), installed_version("dpkg"));
  EXPECT_FALSE(o.ret.contains(k_missing));
  for (const auto& [name, version] : o.ret.items()) {
    ASSERT_TRUE(version.is_string()) << name;
    EXPECT_FALSE(version.get<std::string>().empty()) << name;
  }

  outcome lists = call_fn(make_call("pkg.list_pkgs", json::array(), {{"versions_as_list", true}}));
  ASSERT_TRUE(lists.ret.contains("bash"));
  EXPECT_EQ(lists.ret["bash"], json::array({bash}));
  EXPECT_EQ(lists.ret.size(), o.ret.size());
}

TEST_F(pkg_mod_test, version_of_one_name_is_a_string) {
  EXPECT_EQ(call_fn(make_call("pkg.version", {"bash"})).ret, installed_version("bash"));
  EXPECT_EQ(call_fn(make_call("pkg.version", {k_missing})).ret, "");
}

TEST_F(pkg_mod_test, version_of_several_names_or_a_glob_is_a_dict) {
  outcome o = call_fn(make_call("pkg.version", {"bash", "dpkg", k_missing}));
  EXPECT_EQ(o.ret, (json{{"bash", installed_version("bash")},
                         {"dpkg", installed_version("dpkg")},
                         {k_missing, ""}}));

  outcome glob = call_fn(make_call("pkg.version", {"dpk?"}));
  ASSERT_TRUE(glob.ret.is_object()) << glob.ret.dump();
  EXPECT_EQ(glob.ret.value("dpkg", ""), installed_version("dpkg"));
  EXPECT_FALSE(glob.ret.contains("bash"));
}

TEST_F(pkg_mod_test, latest_version_is_empty_or_newer_than_installed) {
  // refresh=False: the lists on disk, no network.
  outcome one = call_fn(make_call("pkg.latest_version", {"bash"}, {{"refresh", false}}));
  ASSERT_TRUE(one.success) << one.ret.dump();
  ASSERT_TRUE(one.ret.is_string()) << one.ret.dump();
  const std::string latest = one.ret.get<std::string>();
  if (!latest.empty()) {
    EXPECT_TRUE(version_greater(latest, installed_version("bash")))
        << latest << " offered though " << installed_version("bash") << " is installed";
  }

  outcome several =
      call_fn(make_call("pkg.latest_version", {"bash", k_missing}, {{"refresh", false}}));
  ASSERT_TRUE(several.ret.is_object()) << several.ret.dump();
  EXPECT_EQ(several.ret.size(), 2u);
  EXPECT_EQ(several.ret.value("bash", "?"), latest);
  EXPECT_EQ(several.ret.value(k_missing, "?"), "");

  // refresh=True with lists fresher than cache_valid_time: no network either.
  outcome fresh = call_fn(make_call("pkg.latest_version", {"bash"},
                                    {{"refresh", true}, {"cache_valid_time", 315360000}}));
  EXPECT_EQ(fresh.ret, latest);

  // show_installed: the candidate even when it is what is installed.
  outcome shown = call_fn(
      make_call("pkg.latest_version", {"bash"}, {{"refresh", false}, {"show_installed", true}}));
  if (shown.ret != "") {
    EXPECT_FALSE(version_greater(installed_version("bash"), shown.ret.get<std::string>()));
  }
}

TEST_F(pkg_mod_test, version_cmp_is_dpkgs_order) {
  EXPECT_EQ(call_fn(make_call("pkg.version_cmp", {"0.2.4-0", "0.2.4.1-0"})).ret, -1);
  EXPECT_EQ(call_fn(make_call("pkg.version_cmp", {"1.0~rc1", "1.0"})).ret, -1);
  EXPECT_EQ(call_fn(make_call("pkg.version_cmp", {"2:1.0", "1:9.9"})).ret, 1);
  EXPECT_EQ(call_fn(make_call("pkg.version_cmp", {"2:1.0", "1:1.0"}, {{"ignore_epoch", true}})).ret,
            0);
  EXPECT_EQ(call_fn(make_call("pkg.version_cmp", {"1.0", "1.0"})).ret, 0);
}

TEST_F(pkg_mod_test, hold_and_unhold_of_what_dpkg_does_not_know) {
  outcome un = call_fn(make_call("pkg.unhold", {k_missing}));
  ASSERT_TRUE(un.success) << un.ret.dump();
  EXPECT_EQ(un.ret[k_missing]["comment"], "Package " + k_missing + " does not have a state.");
  EXPECT_EQ(un.ret[k_missing]["result"], false);
  outcome test = call_fn(make_call("pkg.hold", json::array(), {{"pkgs", {k_missing}}, {"test", true}}));
  EXPECT_EQ(test.ret[k_missing]["comment"], "Package " + k_missing + " is set to be held.");
  EXPECT_TRUE(test.ret[k_missing]["result"].is_null());
  EXPECT_NE(error_of(make_call("pkg.hold")).find("One of name, pkgs, or sources must be specified"),
            std::string::npos);
  outcome bash = call_fn(make_call("pkg.get_selections", json::array(), {{"pattern", "bash"}}));
  EXPECT_EQ(bash.ret, (json{{"install", {"bash"}}}));
}

TEST_F(pkg_mod_test, refresh_db_within_cache_valid_time_does_nothing) {
  // Ten years: the lists on disk count as fresh, so apt-get update is not run.
  outcome o =
      call_fn(make_call("pkg.refresh_db", json::array(), {{"cache_valid_time", 315360000}}));
  EXPECT_TRUE(o.success);
  EXPECT_EQ(o.ret, json::object());
}

TEST_F(pkg_mod_test, removing_what_is_not_installed_changes_nothing) {
  EXPECT_EQ(call_fn(make_call("pkg.remove", {k_missing})).ret, json::object());
  EXPECT_EQ(call_fn(make_call("pkg.purge", json::array(), {{"pkgs", {k_missing}}})).ret,
            json::object());
  EXPECT_EQ(installed_version("bash").empty(), false);
}

TEST_F(pkg_mod_test, install_of_an_unknown_package_fails_with_apts_message) {
  if (::geteuid() != 0) GTEST_SKIP() << "apt-get install needs root";
  outcome o = execute_call(make_call("pkg.install", {k_missing}));
  EXPECT_FALSE(o.success);
  EXPECT_EQ(o.retcode, 1);
  ASSERT_TRUE(o.ret.is_string());
  const std::string msg = o.ret.get<std::string>();
  EXPECT_TRUE(msg.starts_with("ERROR: Problem encountered installing package(s)")) << msg;
  EXPECT_NE(msg.find("Unable to locate package " + k_missing), std::string::npos) << msg;
}

TEST_F(pkg_mod_test, bad_arguments_name_the_argument) {
  EXPECT_NE(error_of(make_call("pkg.version")).find("needs at least one package name"),
            std::string::npos);
  EXPECT_NE(error_of(make_call("pkg.latest_version", json::array(), {{"refresh", false}}))
                .find("needs at least one package name"),
            std::string::npos);
  EXPECT_NE(error_of(make_call("pkg.list_pkgs", json::array(), {{"bogus", 1}}))
                .find("unknown keyword argument 'bogus'"),
            std::string::npos);
  EXPECT_NE(
      error_of(make_call("pkg.list_pkgs", {"yes"})).find("versions_as_list must be true or false"),
      std::string::npos)
      << "a positional argument fills the first parameter";
  EXPECT_NE(error_of(make_call("pkg.list_pkgs", {true, false, false, 1}))
                .find("takes at most 3 positional argument(s)"),
            std::string::npos);
  EXPECT_NE(error_of(make_call("pkg.latest_version", {"bash"}, {{"refresh", "yes"}}))
                .find("refresh must be true or false"),
            std::string::npos);
  EXPECT_NE(error_of(make_call("pkg.install")).find("needs a package: name="), std::string::npos);
  EXPECT_NE(error_of(make_call("pkg.install", json::array(), {{"pkgs", "bash"}}))
                .find("pkgs must be a list"),
            std::string::npos);
  EXPECT_NE(
      error_of(make_call("pkg.install", {"-oAPT::Foo=1"})).find("name must be a package name"),
      std::string::npos);
  EXPECT_NE(error_of(make_call("pkg.install", {"bash"}, {{"name", "bash"}})).find("given twice"),
            std::string::npos);
  EXPECT_NE(
      error_of(make_call("pkg.install", json::array(), {{"pkgs", {"bash"}}, {"version", "1.0"}}))
          .find("version= applies to a single name="),
      std::string::npos);
  EXPECT_NE(error_of(make_call("pkg.install", {"bash"}, {{"version", "=="}}))
                .find("the version of bash is empty"),
            std::string::npos);
  EXPECT_NE(error_of(make_call("pkg.install", json::array(),
                               {{"sources", {{{"foo", "salt://foo.deb"}}}}}))
                .find("sources is not supported"),
            std::string::npos);
  EXPECT_NE(error_of(make_call("pkg.remove", json::array(), {{"pkgs", {{{"bash", "1"}}}}}))
                .find("pkgs must be a list of package names"),
            std::string::npos);
  EXPECT_NE(error_of(make_call("pkg.refresh_db", json::array(), {{"cache_valid_time", -1}}))
                .find("cache_valid_time must be a number of seconds"),
            std::string::npos);
  // Checked before anything runs: no upgrade happens here.
  EXPECT_NE(error_of(make_call("pkg.upgrade", json::array(), {{"dist_upgrade", "yes"}}))
                .find("dist_upgrade must be true or false"),
            std::string::npos);
  EXPECT_NE(error_of(make_call("pkg.upgrade", json::array(), {{"refresh", false}, {"yes", 1}}))
                .find("unknown keyword argument 'yes'"),
            std::string::npos);
}

TEST_F(pkg_mod_test, bad_arguments_through_execute_are_error_outcomes) {
  outcome o = execute_call(make_call("pkg.version", {"bash"}, {{"bogus", true}}));
  EXPECT_FALSE(o.success);
  EXPECT_EQ(o.ret,
            "ERROR: pkg.version: unknown keyword argument 'bogus' (accepted: "
            "versions_as_list)");
}

TEST_F(pkg_mod_test, salt_bookkeeping_kwargs_are_ignored) {
  outcome o = call_fn(make_call("pkg.version", {"bash"}, {{"__pub_jid", "20260101"}}));
  EXPECT_EQ(o.ret, installed_version("bash"));
}

// A local apt repository that tests/support/apt_repo.sh builds (dpkg-deb,
// apt-ftparchive, a file: source) and that apt sees alone through
// APT_CONFIG while the object lives: apt-get update, install and remove run
// for real, with no network. Whatever it installed is purged on the way out.
class local_apt_repo {
 public:
  explicit local_apt_repo(const std::vector<std::string>& packages) {
    std::string cmd = "bash " BRINE_SOURCE_DIR "/tests/support/apt_repo.sh " + dir_.path();
    for (const auto& p : packages) {
      cmd += " " + p;
      names_.push_back(p.substr(0, p.find('=')));
    }
    process_result r = run_argv({"sh", "-c", cmd + " 2>&1"});
    if (r.retcode != 0) throw std::runtime_error("apt_repo.sh: " + r.stdout_text);
    ::setenv("APT_CONFIG", dir_.file("apt.conf").c_str(), 1);
    purge();  // a run that died before its cleanup
  }
  ~local_apt_repo() {
    purge();
    ::unsetenv("APT_CONFIG");
  }
  local_apt_repo(const local_apt_repo&) = delete;
  local_apt_repo& operator=(const local_apt_repo&) = delete;

 private:
  void purge() {
    for (const auto& n : names_) {
      if (!installed_version(n).empty()) run_argv({"dpkg", "--purge", n});
    }
  }
  test::temp_dir dir_{"brine-apt"};
  std::vector<std::string> names_;
};

// What apt_repo.sh's packages install.
bool has_doc(const std::string& pkg) {
  return ::access(("/usr/share/doc/" + pkg + "/brine-test").c_str(), F_OK) == 0;
}

TEST_F(pkg_mod_test, install_and_remove_a_package_from_a_local_repository) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "needs root: installs and removes a package with apt-get and dpkg (CI runs "
                    "as root)";
  }
  if (::access("/usr/bin/apt-ftparchive", X_OK) != 0) {
    GTEST_SKIP() << "needs apt-ftparchive (Debian package apt-utils; scripts/deps.sh installs it)";
  }
  const std::string pkg = "brine-test-hello";
  local_apt_repo repo({pkg + "=1.0"});

  outcome refreshed = call_fn(make_call("pkg.refresh_db"));
  ASSERT_TRUE(refreshed.success) << refreshed.ret.dump();
  ASSERT_TRUE(refreshed.ret.is_object());
  EXPECT_FALSE(refreshed.ret.empty());
  EXPECT_EQ(call_fn(make_call("pkg.latest_version", {pkg}, {{"refresh", false}})).ret, "1.0");

  outcome installed = call_fn(make_call("pkg.install", {pkg}));
  ASSERT_TRUE(installed.success) << installed.ret.dump();
  EXPECT_EQ(installed_version(pkg), "1.0");
  EXPECT_TRUE(has_doc(pkg));
  EXPECT_EQ(installed.ret, (json{{pkg, {{"old", ""}, {"new", "1.0"}}}}));
  EXPECT_EQ(call_fn(make_call("pkg.version", {pkg})).ret, "1.0");
  EXPECT_EQ(call_fn(make_call("pkg.install", {pkg}, {{"version", "1.0"}})).ret, json::object())
      << "installing what is installed changes nothing";

  outcome removed = call_fn(make_call("pkg.remove", {pkg}));
  ASSERT_TRUE(removed.success) << removed.ret.dump();
  EXPECT_EQ(removed.ret, (json{{pkg, {{"old", "1.0"}, {"new", ""}}}}));
  EXPECT_EQ(installed_version(pkg), "");
  EXPECT_FALSE(has_doc(pkg));
  EXPECT_EQ(call_fn(make_call("pkg.version", {pkg})).ret, "");
}

}  // namespace
}  // namespace brine::modules
