// module.run/module.wait, git.config_set/unset, archive.extracted,
// test.check_pillar and the cmd states' script, runas and umask, each called
// as the runner calls them, against a fake minion whose file_roots and
// pillar the test sets.

#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "modules/alternatives.h"
#include "states/tests/state_fixture.h"

namespace brine::states {
namespace {

namespace fs = std::filesystem;

int sh(const std::string& command) { return std::system(command.c_str()); }

class misc_states_test : public state_fixture {
 protected:
  misc_states_test() : state_fixture("brine-misc-states") {
    fs::create_directories(dir_.file("roots"));
    minion_.opts_["file_roots"] = {{"base", {dir_.file("roots")}}};
    minion_.opts_["id"] = "m1";
    minion_.grains_["id"] = "m1";
    context_ = &minion_;
  }

  // Salt's state compiler gives every chunk its __id__.
  json call(const std::string& fun, json low, bool test = false) {
    if (!low.contains("__id__")) low["__id__"] = low.value("name", "id");
    return state_fixture::call(fun, std::move(low), test);
  }
};

// module.run

TEST_F(misc_states_test, module_run_new_syntax_runs_each_function) {
  json low = {{"name", "x"}, {"test.echo", json::array({"hi"})},
              {"test.kwarg", json::array({json{{"a", 1}}})}};
  json r = call("module.run", low);
  EXPECT_EQ(r["name"], json::array({"test.echo", "test.kwarg"}));
  EXPECT_EQ(r["result"], true);
  EXPECT_EQ(r["comment"], "test.echo: hi, test.kwarg: Success");
  EXPECT_EQ(r["changes"]["test.echo"], "hi");
  EXPECT_EQ(r["changes"]["test.kwarg"]["a"], 1);
}

TEST_F(misc_states_test, module_run_new_syntax_failures_and_missing) {
  json r = call("module.run", {{"name", "x"}, {"test.false", json::array()}});
  EXPECT_EQ(r["result"], false);
  EXPECT_EQ(r["comment"], "'test.false': False");
  EXPECT_TRUE(r["changes"].empty());

  r = call("module.run", {{"name", "x"}, {"nosuch.a", nullptr}, {"nosuch.b", nullptr}});
  EXPECT_EQ(r["result"], false);
  EXPECT_EQ(r["comment"], "Unavailable functionTrue: nosuch.a, nosuch.b.");

  // A mapping with a non-zero retcode is a failure (Salt's _get_dict_result).
  r = call("module.run", {{"name", "x"}, {"cmd.run_all", json::array({json{{"cmd", "exit 3"}}})}});
  EXPECT_EQ(r["result"], false);
  EXPECT_EQ(r["comment"], "'cmd.run_all' failed: (error message N/A)");

  // A function that raises.
  r = call("module.run", {{"name", "x"}, {"test.exception", json::array({"boom"})}});
  EXPECT_EQ(r["result"], false);
  EXPECT_EQ(r["comment"], "'test.exception' failed: boom");
}

TEST_F(misc_states_test, module_run_test_mode_runs_nothing) {
  json r = call("module.run", {{"name", "x"}, {"cmd.run", json::array({"touch " + dir_.file("t")})}},
                true);
  EXPECT_EQ(r["result"], nullptr);
  EXPECT_EQ(r["comment"], "Function cmd.run to be executed.");
  EXPECT_FALSE(fs::exists(dir_.file("t")));
  r = call("module.run", {{"name", "test.echo"}, {"text", "x"}}, true);
  EXPECT_EQ(r["result"], nullptr);
  EXPECT_EQ(r["comment"], "Module function test.echo is set to execute");
}

TEST_F(misc_states_test, module_run_legacy_syntax) {
  json r = call("module.run", {{"name", "test.echo"}, {"text", "old"}});
  EXPECT_EQ(r["name"], "test.echo");
  EXPECT_EQ(r["result"], true);
  EXPECT_EQ(r["comment"], "Module function test.echo executed");
  EXPECT_EQ(r["changes"]["ret"], "old");

  // m_name is the function's own name=; args and kwargs spread.
  r = call("module.run", {{"name", "test.arg"}, {"m_name", "inner"}, {"args", {1, 2}},
                          {"kwargs", {{"k", "v"}}}});
  EXPECT_EQ(r["changes"]["ret"]["args"], json::array({1, 2}));
  EXPECT_EQ(r["changes"]["ret"]["kwargs"]["name"], "inner");
  EXPECT_EQ(r["changes"]["ret"]["kwargs"]["k"], "v");

  r = call("module.run", {{"name", "test.arg"}, {"args", "notalist"}});
  EXPECT_EQ(r["comment"], "'args' must be a list.");

  r = call("module.run", {{"name", "nosuch.fun"}});
  EXPECT_EQ(r["result"], false);
  EXPECT_EQ(r["comment"], "Module function nosuch.fun is not available");

  r = call("module.run", {{"name", "test.false"}});
  EXPECT_EQ(r["result"], false);
  EXPECT_EQ(r["changes"]["ret"], false);

  r = call("module.run", {{"name", "alternatives.show_link"}});
  EXPECT_EQ(r["result"], false);
  EXPECT_EQ(r["comment"], "The following arguments are missing: m_name");
}

TEST_F(misc_states_test, module_wait_runs_only_through_mod_watch) {
  json low = {{"name", "test.echo"}, {"text", "w"}};
  json r = call("module.wait", low);
  EXPECT_EQ(r["result"], true);
  EXPECT_TRUE(r["changes"].empty());
  low["sfun"] = "wait";
  low["__reqs__"] = {{"watch", json::array()}};
  r = call("module.mod_watch", low);
  EXPECT_EQ(r["changes"]["ret"], "w");
  // The new syntax names the bookkeeping keys too, as Salt does.
  r = call("module.mod_watch", {{"name", "id"}, {"test.echo", {"n"}}, {"sfun", "wait"},
                                {"__reqs__", {{"watch", json::array()}}}});
  EXPECT_EQ(r["name"], json::array({"test.echo", "sfun", "__reqs__"}));
  EXPECT_EQ(r["changes"]["test.echo"], "n");
}

// test.check_pillar

TEST_F(misc_states_test, check_pillar_types_and_missing) {
  minion_.pillar_ = {
      {"flag", true}, {"num", 3}, {"text", "t"}, {"items", {1}}, {"nested", {{"inner", "x"}}}};
  json r = call("test.check_pillar", {{"name", "c"}, {"present", "flag"},
                                      {"integer", {"num", "flag"}},
                                      {"string", "nested:inner"}, {"verbose", true}});
  EXPECT_EQ(r["result"], true);
  EXPECT_EQ(r["comment"],
            "Those keys passed the check:\n- flag (<class 'int'>)\n- num (<class 'int'>)\n"
            "- nested:inner ((<class 'str'>,))\n");
  r = call("test.check_pillar", {{"name", "c"}, {"present", {"nope"}}, {"dictionary", {"items"}}});
  EXPECT_EQ(r["result"], false);
  EXPECT_EQ(r["comment"],
            "Pillar key \"nope\" is missing.\nPillar key \"items\" is not <class 'dict'>.\n");
  EXPECT_THROW(call("test.check_pillar", {{"name", "c"}}), std::exception);
}

// git.config_*

class git_test : public misc_states_test {
 protected:
  void SetUp() override {
    if (!have_tool("git")) GTEST_SKIP() << "needs git";
    repo_ = dir_.file("repo");
    ASSERT_EQ(sh("git init -q " + repo_), 0);
  }
  std::string repo_;
};

TEST_F(git_test, config_set_adds_changes_and_is_idempotent) {
  json low = {{"name", "user.name"}, {"value", "A B"}, {"repo", repo_}};
  json r = call("git.config_set", low, true);
  EXPECT_EQ(r["result"], nullptr);
  EXPECT_EQ(r["comment"], "'user.name' would be added as 'A B'");
  EXPECT_EQ(r["changes"]["old"], nullptr);
  r = call("git.config_set", low);
  EXPECT_EQ(r["result"], true);
  EXPECT_EQ(r["comment"], "'user.name' was added as 'A B'");
  EXPECT_EQ(r["changes"]["user.name"]["new"], json::array({"A B"}));
  r = call("git.config_set", low);
  EXPECT_EQ(r["comment"], "'user.name' is already set to 'A B'");
  EXPECT_TRUE(r["changes"].empty());

  json multi = {{"name", "x.y"}, {"multivar", {"1", "2"}}, {"repo", repo_}};
  r = call("git.config_set", multi);
  EXPECT_EQ(r["comment"], "'x.y' was added as ['1', '2']");
  multi["multivar"] = "3";
  r = call("git.config_set", multi);
  EXPECT_EQ(r["comment"], "'x.y' was set to ['3']");
  EXPECT_EQ(r["changes"]["x.y"]["old"], json::array({"1", "2"}));
}

TEST_F(git_test, config_set_argument_errors) {
  json r = call("git.config_set", {{"name", "a.b"}, {"value", "v"}});
  EXPECT_EQ(r["comment"], "Non-global config options require the 'repo' argument to be set");
  r = call("git.config_set", {{"name", "a.b"}, {"value", "v"}, {"repo", repo_}, {"bogus", 1}});
  EXPECT_EQ(r["comment"], "The following keyword arguments are not valid: bogus=1");
}

TEST_F(git_test, config_unset_single_multivar_and_regex) {
  ASSERT_EQ(sh("git -C " + repo_ + " config a.one 1 && git -C " + repo_ +
               " config a.many x && git -C " + repo_ + " config --add a.many y"),
            0);
  json r = call("git.config_unset", {{"name", "a.one"}, {"repo", repo_}}, true);
  EXPECT_EQ(r["result"], nullptr);
  EXPECT_EQ(r["comment"], "1 key(s) would have value(s) unset");
  r = call("git.config_unset", {{"name", "a.one"}, {"repo", repo_}});
  EXPECT_EQ(r["result"], true);
  EXPECT_EQ(r["comment"], "Value(s) successfully unset");
  EXPECT_EQ(r["changes"]["a.one"], json::array({"1"}));
  r = call("git.config_unset", {{"name", "a.one"}, {"repo", repo_}});
  EXPECT_EQ(r["comment"], "No matching keys are set");

  r = call("git.config_unset", {{"name", "a.many"}, {"repo", repo_}});
  EXPECT_EQ(r["result"], false);
  EXPECT_EQ(r["comment"],
            "Multivar(s) matched by the key expression (set 'all' to True to force removal): "
            "a.many (x, y)");
  r = call("git.config_unset", {{"name", "a.many"}, {"value_regex", "^y$"}, {"repo", repo_}});
  EXPECT_EQ(r["comment"], "Value(s) successfully unset");
  EXPECT_EQ(r["changes"]["a.many"], json::array({"y"}));
}

// archive.extracted

class archive_test : public misc_states_test {
 protected:
  void SetUp() override {
    if (!have_tool("tar") || !have_tool("unzip") || !have_tool("zip") || !have_tool("gzip")) {
      GTEST_SKIP() << "needs tar, gzip, zip and unzip";
    }
    std::string src = dir_.file("src");
    put(src + "/top/a.txt", "alpha\n");
    put(src + "/top/sub/b.txt", "beta\n");
    put(src + "/x.txt", "x\n");
    ASSERT_EQ(sh("tar -C " + src + " -czf " + dir_.file("roots/top.tar.gz") + " top"), 0);
    ASSERT_EQ(sh("tar -C " + src + " -cf " + dir_.file("bomb.tar") + " top x.txt"), 0);
    ASSERT_EQ(sh("cd " + src + " && zip -qr " + dir_.file("roots/top.zip") + " top"), 0);
  }
};

TEST_F(archive_test, extracts_salt_tar_once) {
  json low = {{"name", dir_.file("out")}, {"source", "salt://top.tar.gz"}, {"__env__", "base"}};
  json r = call("archive.extracted", low, true);
  EXPECT_EQ(r["result"], nullptr);
  EXPECT_EQ(r["comment"], "Archive salt://top.tar.gz would be cached (if necessary) and checked "
                          "to discover if extraction is needed");
  r = call("archive.extracted", low);
  EXPECT_EQ(r["result"], true) << r.dump();
  EXPECT_EQ(r["comment"], "salt://top.tar.gz extracted to " + dir_.file("out") +
                              "/, due to absence of one or more files/dirs. Output was trimmed "
                              "to False number of lines");
  EXPECT_EQ(r["changes"]["directories_created"], json::array({dir_.file("out") + "/"}));
  // The members in archive order (tar's, from the directory it read).
  std::vector<std::string> files = r["changes"]["extracted_files"].get<std::vector<std::string>>();
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"top", "top/a.txt", "top/sub", "top/sub/b.txt"}));
  EXPECT_EQ(read("out/top/sub/b.txt"), "beta\n");
  r = call("archive.extracted", low);
  EXPECT_EQ(r["result"], true);
  EXPECT_EQ(r["comment"], "All files in archive are already present");
  EXPECT_TRUE(r["changes"].empty());
}

TEST_F(archive_test, extracts_local_zip_and_checks_the_hash) {
  std::string zip = dir_.file("roots/top.zip");
  json low = {{"name", dir_.file("z")}, {"source", zip}, {"source_hash", "sha256=00"}};
  json r = call("archive.extracted", low);
  EXPECT_EQ(r["result"], false);
  EXPECT_EQ(r["comment"].get<std::string>().rfind("Source hash sha256=00 format is invalid.", 0), 0u)
      << r["comment"];
  low["source_hash"] = "sha256=" + std::string(64, '0');
  r = call("archive.extracted", low);
  EXPECT_EQ(r["result"], false);
  EXPECT_NE(r["comment"].get<std::string>().find("does not match the desired source_hash"),
            std::string::npos);
  low.erase("source_hash");
  low["trim_output"] = 1;
  r = call("archive.extracted", low, true);
  EXPECT_EQ(r["result"], nullptr);
  EXPECT_EQ(r["comment"], "Archive " + zip + " would be extracted to " + dir_.file("z") +
                              "/, due to absence of one or more files/dirs");
  r = call("archive.extracted", low);
  EXPECT_EQ(r["result"], true) << r.dump();
  EXPECT_EQ(r["changes"]["extracted_files"],
            json::array({"top/", "List trimmed after 1 files."}));
  EXPECT_EQ(read("z/top/a.txt"), "alpha\n");
  r = call("archive.extracted", low);
  EXPECT_EQ(r["comment"], "All files in archive are already present");
}

TEST_F(archive_test, refuses_a_tar_bomb_unless_told) {
  json low = {{"name", dir_.file("b")}, {"source", dir_.file("bomb.tar")}};
  json r = call("archive.extracted", low);
  EXPECT_EQ(r["result"], false);
  EXPECT_TRUE(r["comment"].get<std::string>().starts_with(
      "Archive does not have a single top-level directory."));
  low["enforce_toplevel"] = false;
  r = call("archive.extracted", low);
  EXPECT_EQ(r["result"], true) << r.dump();
  EXPECT_TRUE(fs::exists(dir_.file("b/x.txt")));
}

TEST_F(archive_test, if_missing_and_argument_errors) {
  json r = call("archive.extracted", {{"name", dir_.file("i")}, {"source", "salt://top.tar.gz"},
                                      {"if_missing", dir_.path()}});
  EXPECT_EQ(r["result"], true);
  EXPECT_EQ(r["comment"], "Path " + dir_.path() + " exists");
  r = call("archive.extracted", {{"name", "rel"}, {"source", "salt://top.tar.gz"}});
  EXPECT_EQ(r["comment"], "rel is not an absolute path");
  r = call("archive.extracted", {{"name", dir_.file("q")}, {"source", dir_.file("nope.tgz")}});
  EXPECT_EQ(r["comment"], "Source file '" + dir_.file("nope.tgz") + "' does not exist");
  r = call("archive.extracted",
           {{"name", dir_.file("q")}, {"source", "salt://top.tar.gz"}, {"archive_format", "7z"}});
  EXPECT_TRUE(r["comment"].get<std::string>().starts_with("Invalid archive_format '7z'"));
}

TEST_F(archive_test, wrong_types_need_force_or_clean_and_options_run_tar) {
  std::string tgz = dir_.file("roots/top.tar.gz");
  json low = {{"name", dir_.file("w")}, {"source", tgz}};
  // A file where the archive has a directory.
  put(dir_.file("w/top/sub"), "not a dir\n");
  json r = call("archive.extracted", low);
  EXPECT_EQ(r["result"], false);
  EXPECT_EQ(r["comment"], "The below paths (relative to " + dir_.file("w") +
                              "/) exist, but are the incorrect type (file instead of directory, "
                              "symlink instead of file, etc.). To proceed with extraction, set "
                              "'force' to True. Note that this will remove these paths before "
                              "extracting.\n\n- top/sub/");
  json clean = low;
  clean["clean"] = true;
  r = call("archive.extracted", clean, true);
  EXPECT_EQ(r["result"], nullptr);
  EXPECT_TRUE(r["comment"].get<std::string>().find("Since the 'clean' option is enabled") !=
              std::string::npos)
      << r.dump();
  json forced = low;
  forced["force"] = true;
  r = call("archive.extracted", forced);
  EXPECT_EQ(r["result"], true) << r.dump();
  EXPECT_EQ(r["changes"]["removed"], json::array({dir_.file("w") + "/top/sub/"}));
  EXPECT_EQ(read("w/top/sub/b.txt"), "beta\n");
  // clean: the top-level members go first, then the archive is extracted
  // again; options= runs tar's own command line (its verbose output).
  clean["options"] = "z";
  clean["overwrite"] = true;
  put(dir_.file("w/top/stray.txt"), "stray\n");
  r = call("archive.extracted", clean);
  EXPECT_EQ(r["result"], true) << r.dump();
  EXPECT_EQ(r["changes"]["removed"], json::array({dir_.file("w") + "/top/"}));
  EXPECT_FALSE(fs::exists(dir_.file("w/top/stray.txt")));
  std::vector<std::string> files = r["changes"]["extracted_files"].get<std::vector<std::string>>();
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"top/", "top/a.txt", "top/sub/", "top/sub/b.txt"}));
  clean["clean_parent"] = true;
  EXPECT_EQ(call("archive.extracted", clean)["comment"],
            "Only one of 'clean' and 'clean_parent' can be set to True");
}

TEST_F(archive_test, ownership_is_enforced_on_the_top_level_members) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to change owners";
  std::string tgz = dir_.file("roots/top.tar.gz");
  json low = {{"name", dir_.file("o")}, {"source", tgz}, {"user", "nobody"}};
  json r = call("archive.extracted", low);
  EXPECT_EQ(r["result"], true) << r.dump();
  EXPECT_EQ(r["changes"]["updated ownership"], true);
  struct stat st {};
  ASSERT_EQ(::lstat(dir_.file("o/top/sub/b.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, ::getpwnam("nobody")->pw_uid);
  ASSERT_EQ(::chown(dir_.file("o/top/a.txt").c_str(), 0, 0), 0);
  ASSERT_EQ(::chown(dir_.file("o/top").c_str(), 0, 0), 0);
  r = call("archive.extracted", low, true);
  EXPECT_EQ(r["result"], nullptr) << r.dump();
  EXPECT_EQ(r["comment"], "All files in archive are already present. Ownership would be "
                          "updated on one or more files/directories.");
  r = call("archive.extracted", low);
  EXPECT_EQ(r["result"], true);
  EXPECT_EQ(r["changes"]["updated ownership"], true);
  ASSERT_EQ(::lstat(dir_.file("o/top/a.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, ::getpwnam("nobody")->pw_uid);
  EXPECT_EQ(call("archive.extracted", {{"name", dir_.file("o")}, {"source", tgz},
                                       {"user", "nosuchuser9"}})["comment"],
            "User nosuchuser9 does not exist");
}

// cmd.script, runas, umask

TEST_F(misc_states_test, cmd_script_from_salt_with_args_and_stateful) {
  write("roots/s.sh", "#!/bin/sh\necho \"args: $*\"\n");
  json r = call("cmd.script", {{"name", "salt://s.sh"}, {"args", "'a b' c"}});
  EXPECT_EQ(r["result"], true) << r.dump();
  EXPECT_EQ(r["comment"], "Command 'salt://s.sh' run");
  EXPECT_EQ(r["changes"]["stdout"], "args: a b c");
  r = call("cmd.script", {{"name", "salt://s.sh"}}, true);
  EXPECT_EQ(r["result"], nullptr);
  EXPECT_EQ(r["comment"], "Command 'salt://s.sh' would have been executed");

  write("roots/st.sh", "#!/bin/sh\necho 'changed=yes comment=\"did\"'\n");
  r = call("cmd.script", {{"name", "salt://st.sh"}, {"stateful", true}});
  EXPECT_EQ(r["comment"], "did");
  EXPECT_EQ(r["changes"]["changed"], "yes");

  r = call("cmd.script", {{"name", "salt://missing.sh"}, {"__env__", "base"}});
  EXPECT_EQ(r["result"], false);
  EXPECT_EQ(r["comment"], "Unable to cache script salt://missing.sh from saltenv 'base'");
  EXPECT_EQ(r["changes"]["cache_error"], true);
}

TEST_F(misc_states_test, cmd_script_local_template_and_success_retcodes) {
  write("local.sh", "#!/bin/sh\necho local $1\nexit 5\n");
  ::chmod(path("local.sh").c_str(), 0755);
  // Salt caches `source`, else the whole name: with arguments in the name
  // the source must be given.
  json r = call("cmd.script", {{"name", dir_.file("local.sh") + " one"}});
  EXPECT_EQ(r["changes"]["cache_error"], true);
  r = call("cmd.script", {{"name", dir_.file("local.sh") + " one"},
                          {"source", dir_.file("local.sh")}, {"success_retcodes", {5}}});
  EXPECT_EQ(r["result"], true) << r.dump();
  EXPECT_EQ(r["changes"]["stdout"], "local one");
  EXPECT_EQ(r["changes"]["retcode"], 0);

  write("roots/t.sh", "#!/bin/sh\necho '{{ word }} on {{ grains.id }}'\n");
  r = call("cmd.script", {{"name", "salt://t.sh"}, {"template", "jinja"},
                          {"context", {{"word", "hello"}}}, {"__env__", "base"}});
  EXPECT_EQ(r["result"], true) << r.dump();
  EXPECT_EQ(r["changes"]["stdout"], "hello on m1");
}

// Salt's template context of file.managed (file.get_managed, then
// salt.utils.templates.render_tmpl): name, the source the list chose, user,
// group, mode as managed() normalizes it, attrs, saltenv, the state's
// other keyword arguments (not requisites), then defaults updated by
// context over all of them.
TEST_F(misc_states_test, file_managed_template_sees_salts_whole_context) {
  write("roots/app/tmpl.conf",
        "# {{ source }} for {{ name }}\n{{ user }} {{ group }} {{ mode }} {{ attrs }} {{ saltenv }}\n"
        "{{ port }} {{ a }} {{ b }} {{ require is defined }} {{ order is defined }} "
        "{{ grains.id }}\n");
  std::string dest = dir_.file("out.conf");
  json r = call("file.managed",
                {{"name", dest},
                 {"source", {"salt://app/missing.conf", "salt://app/tmpl.conf"}},
                 {"template", "jinja"}, {"user", "root"}, {"mode", 644}, {"port", 8080},
                 {"require", {{{"file", "x"}}}}, {"order", 10000},
                 {"defaults", {{"a", 1}, {"b", 2}}}, {"context", {{"b", 3}}},
                 {"__env__", "base"}, {"__sls__", "app"}});
  EXPECT_EQ(r["result"], true) << r.dump();
  EXPECT_EQ(read("out.conf"), "# salt://app/tmpl.conf for " + dest +
                                  "\nroot None 0644 None base\n8080 1 3 False False m1\n");

  // context wins over the state's own arguments, name among them.
  write("roots/app/name.conf", "{{ name }} {{ source }}\n");
  r = call("file.managed", {{"name", dir_.file("name.conf")}, {"source", "salt://app/name.conf"},
                            {"template", "jinja"}, {"context", {{"name", "from-context"}}},
                            {"__env__", "base"}});
  EXPECT_EQ(r["result"], true) << r.dump();
  EXPECT_EQ(read("name.conf"), "from-context salt://app/name.conf\n");

  // What Salt's template cannot see fails as Salt words it.
  write("roots/app/bad.conf", "{{ nothing_here }}\n");
  r = call("file.managed", {{"name", dir_.file("bad.conf")}, {"source", "salt://app/bad.conf"},
                            {"template", "jinja"}, {"__env__", "base"}});
  EXPECT_EQ(r["result"], false);
  EXPECT_TRUE(r["comment"].get<std::string>().starts_with(
      "Unable to manage file: Jinja variable 'nothing_here' is undefined"))
      << r["comment"];
}

// Salt's _check_user: a user or group that does not exist fails the state
// in one text, but under test only warns (a package installed earlier in
// the run may create it), and the plan shows the owner as a change. Ids
// given as numbers are ids (file.user_to_uid).
TEST_F(misc_states_test, file_managed_owner_checks_as_salt) {
  std::string dest = dir_.file("owned.conf");
  json low = {{"name", dest}, {"contents", "x"}, {"user", "brinenosuchuser"},
              {"group", "brinenosuchgroup"}};
  json r = call("file.managed", low);
  EXPECT_EQ(r["result"], false);
  EXPECT_EQ(r["comment"],
            "User brinenosuchuser is not available Group brinenosuchgroup is not available");
  r = call("file.managed", low, true);
  EXPECT_EQ(r["result"], nullptr) << r.dump();
  EXPECT_EQ(r["changes"], (json{{"newfile", dest}}));
  write("owned.conf", "x\n");
  r = call("file.managed", low, true);
  EXPECT_EQ(r["result"], nullptr) << r.dump();
  EXPECT_EQ(r["changes"]["user"], "brinenosuchuser");
  EXPECT_EQ(r["changes"]["group"], "brinenosuchgroup");
  r = call("file.managed", {{"name", dest}, {"contents", "x"}, {"user", ::getuid()},
                            {"group", ::getgid()}});
  EXPECT_EQ(r["result"], true) << r.dump();
}

// file.recurse hands each file's salt:// URL (with its saltenv, as
// salt.utils.url.create writes it) to the template as `source`.
TEST_F(misc_states_test, file_recurse_template_source_is_the_files_url) {
  write("roots/tree/a.conf", "{{ source }} {{ name }} {{ mode }}\n");
  std::string dest = dir_.file("tree-out");
  json r = call("file.recurse", {{"name", dest}, {"source", "salt://tree"},
                                 {"template", "jinja"}, {"file_mode", "600"},
                                 {"__env__", "base"}});
  EXPECT_EQ(r["result"], true) << r.dump();
  EXPECT_EQ(read("tree-out/a.conf"),
            "salt://tree/a.conf?saltenv=base " + dest + "/a.conf 0600\n");
}

// alternatives.* against a fake update-alternatives that keeps its
// registrations in files beside it and the links in the test's directory.
constexpr const char* k_fake_alternatives = R"sh(#!/bin/sh
here=$(dirname "$0")
links="$here/../links"
case "$1" in
  --display)
    [ -f "$here/reg_$2" ] || { echo "update-alternatives: error: no alternatives for $2" >&2; exit 2; }
    echo "$2 - auto mode"
    echo "  link currently points to $(readlink "$links/$2")"
    cat "$here/reg_$2" ;;
  --install)
    echo "$4 - priority $5" >> "$here/reg_$3"
    [ -L "$links/$3" ] || ln -s "$4" "$links/$3"
    echo "update-alternatives: using $4 to provide $2 ($3) in auto mode" ;;
  --remove)
    grep -v "^$3 " "$here/reg_$2" > "$here/tmp"; mv "$here/tmp" "$here/reg_$2"
    [ "$(readlink "$links/$2")" = "$3" ] && rm -f "$links/$2"
    [ -s "$here/reg_$2" ] || rm -f "$here/reg_$2" ;;
  --set)
    ln -sfn "$3" "$links/$2" ;;
  --auto)
    echo "update-alternatives: $2 in auto mode" ;;
esac
)sh";

class alternatives_states_test : public misc_states_test {
 protected:
  alternatives_states_test() {
    modules::alternatives_paths p;
    p.links = dir_.file("links");
    p.redhat_admin = dir_.file("admin");
    p.suse_admin = dir_.file("admin");
    p.tool_dir = dir_.file("bin");
    fs::create_directories(p.links);
    fs::create_directories(p.tool_dir);
    std::string tool = p.tool_dir + "/update-alternatives";
    put(tool, k_fake_alternatives);
    ::chmod(tool.c_str(), 0755);
    modules::register_alternatives_module(alternatives_, p);
    table_ = &alternatives_;
  }
  modules::registry alternatives_;
};

// Salt's alternatives states, branch by branch (salt/states/alternatives.py).
TEST_F(alternatives_states_test, install_set_remove_auto_as_salt_words_them) {
  json low = {{"name", "brinealt"}, {"link", "/usr/bin/brinealt"}, {"path", "/opt/a"},
              {"priority", 30}};
  json r = call("alternatives.install", low, true);
  EXPECT_EQ(r["result"], nullptr) << r.dump();
  EXPECT_EQ(r["comment"], "Alternative will be set for brinealt to /opt/a with priority 30");
  EXPECT_EQ(r.dump().substr(0, 78),
            R"({"name":"brinealt","link":"/usr/bin/brinealt","path":"/opt/a","priority":30,"r)");

  r = call("alternatives.install", low);
  EXPECT_EQ(r["result"], true) << r.dump();
  EXPECT_EQ(r["comment"], "Alternative for brinealt set to path /opt/a with priority 30");
  EXPECT_EQ(r["changes"].dump(),
            R"({"name":"brinealt","link":"/usr/bin/brinealt","path":"/opt/a","priority":30})");
  r = call("alternatives.install", low);
  EXPECT_EQ(r["comment"], "Alternative /opt/a for brinealt is already registered");
  EXPECT_TRUE(r["changes"].empty());

  // A second one registers without becoming the default.
  low["path"] = "/opt/b";
  r = call("alternatives.install", low);
  EXPECT_EQ(r["comment"],
            "Alternative /opt/b for brinealt registered with priority 30 and not set to default");

  r = call("alternatives.set", {{"name", "brinealt"}, {"path", "/opt/nope"}});
  EXPECT_EQ(r["result"], false);
  EXPECT_EQ(r["comment"], "Alternative /opt/nope for brinealt doesn't exist");
  r = call("alternatives.set", {{"name", "brinealt"}, {"path", "/opt/b"}}, true);
  EXPECT_EQ(r["result"], nullptr);
  EXPECT_EQ(r["comment"], "Alternative for brinealt will be set to path /opt/b");
  r = call("alternatives.set", {{"name", "brinealt"}, {"path", "/opt/b"}});
  EXPECT_EQ(r["comment"], "Alternative for brinealt set to path /opt/b");
  EXPECT_EQ(r["changes"], (json{{"path", "/opt/b"}}));
  r = call("alternatives.set", {{"name", "brinealt"}, {"path", "/opt/b"}});
  EXPECT_EQ(r["comment"], "Alternative for brinealt already set to /opt/b");

  r = call("alternatives.auto", {{"name", "brinealt"}});
  EXPECT_EQ(r["comment"], "brinealt already in auto mode");

  r = call("alternatives.remove", {{"name", "brinealt"}, {"path", "/opt/b"}}, true);
  EXPECT_EQ(r["comment"], "Alternative for brinealt will be removed");
  r = call("alternatives.remove", {{"name", "brinealt"}, {"path", "/opt/b"}});
  EXPECT_EQ(r["comment"], "Alternative for brinealt removed");
  EXPECT_TRUE(r["changes"].empty());
  r = call("alternatives.remove", {{"name", "brinealt"}, {"path", "/opt/a"}});
  EXPECT_EQ(r["comment"], "Alternative for brinealt removed");
  r = call("alternatives.remove", {{"name", "brinealt"}, {"path", "/opt/a"}});
  EXPECT_EQ(r["result"], false);
  EXPECT_EQ(r["comment"], "Alternative for brinealt doesn't exist");
}

// ini.options_present as salt/states/ini_manage.py (3006.10+) plans and
// applies it: per-key comments under test, the module's changes after.
TEST_F(misc_states_test, ini_options_present_plans_then_applies) {
  write("app.ini", "name=old\n\n[main]\nkey1 = v1\nkeep = yes\n");
  json low = {{"name", dir_.file("app.ini")},
              {"sections", {{"name", "old"}, {"main", {{"key1", "v2"}, {"keep", "yes"}}}}}};
  json r = call("ini.options_present", low, true);
  EXPECT_EQ(r["result"], nullptr) << r.dump();
  EXPECT_EQ(r["comment"],
            "Unchanged key name.\nChanged key key1 in section main.\nUnchanged key keep in section main.\n");
  EXPECT_TRUE(r["changes"].empty());
  r = call("ini.options_present", low);
  EXPECT_EQ(r["result"], true) << r.dump();
  EXPECT_EQ(r["comment"], "Changes take effect");
  EXPECT_EQ(r["changes"].dump(), R"({"main":{"key1":{"before":"v1","after":"v2"}}})");
  EXPECT_EQ(read("app.ini"), "name = old\n\n[main]\nkey1 = v2\nkeep = yes\n");
  r = call("ini.options_present", low);
  EXPECT_EQ(r["comment"], "No anomaly detected");
  EXPECT_TRUE(r["changes"].empty());
  // strict: the keys not named go.
  low["strict"] = true;
  low["sections"] = {{"main", {{"key1", "v2"}}}};
  r = call("ini.options_present", low, true);
  EXPECT_EQ(r["comment"], "Removed key name.\nDeleted key keep in section main.\nUnchanged key key1 in section main.\n");
  r = call("ini.options_present", low);
  EXPECT_EQ(read("app.ini"), "[main]\nkey1 = v2\n");
  EXPECT_EQ(r["changes"].dump(),
            R"({"name":{"before":"old","after":null},"main":{"keep":{"before":"yes","after":null}}})");
}

// A state module the tree ships as Python (_states/ufw.py, as ufw-formula
// does) is named as such; others get Salt's missing_fun_string.
TEST_F(misc_states_test, missing_state_modules_say_why) {
  std::vector<std::string> roots = {dir_.file("roots")};
  write("roots/_states/ufw.py", "def enabled(name): pass\n");
  EXPECT_EQ(missing_fun_string("ufw.enabled", states_, &functions_, roots),
            "'ufw' is a custom state module in Python (salt://_states/ufw.py), which brine does "
            "not run: write these states with brine's own (cmd.run, file.*, module.run)");
  EXPECT_EQ(missing_fun_string("iptables.append", states_, &functions_, roots),
            "'iptables' __virtual__ returned False: iptables module could not be loaded");
  EXPECT_EQ(missing_fun_string("nosuch.thing", states_, &functions_, roots),
            "'nosuch.thing' is not available.");
  EXPECT_EQ(missing_fun_string("file.nosuch", states_, &functions_, roots),
            "'file.nosuch' is not available.");
}

TEST_F(misc_states_test, cmd_run_umask_applies_to_the_command) {
  json r = call("cmd.run", {{"name", "umask"}, {"umask", "077"}});
  EXPECT_EQ(r["changes"]["stdout"], "0077");
  r = call("cmd.run", {{"name", "umask"}, {"umask", "0"}});
  EXPECT_EQ(r["result"], false);
  EXPECT_EQ(r["comment"], "Zero umask is not allowed.");
}

// A throwaway account, removed at the end of the test whatever happens.
class runas_test : public misc_states_test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "runas needs root";
    if (!have_tool("useradd") || !have_tool("userdel")) GTEST_SKIP() << "needs useradd/userdel";
    sh("userdel -r brinerunas >/dev/null 2>&1");
    // The user must reach its home inside the test's directory.
    ::chmod(dir_.path().c_str(), 0755);
    ASSERT_EQ(sh("useradd -m -d " + dir_.file("home") + " -s /bin/sh brinerunas"), 0);
    made_ = true;
  }
  void TearDown() override {
    if (made_) sh("userdel -r brinerunas >/dev/null 2>&1");
  }
  bool made_ = false;
};

TEST_F(runas_test, cmd_run_as_the_user_with_its_home) {
  json r = call("cmd.run", {{"name", "id -un; echo $HOME; pwd"}, {"runas", "brinerunas"}});
  EXPECT_EQ(r["result"], true) << r.dump();
  EXPECT_EQ(r["changes"]["stdout"],
            "brinerunas\n" + dir_.file("home") + "\n" + dir_.file("home"));
  r = call("cmd.run", {{"name", "id -un"}, {"runas", "nosuchuserhere"}});
  EXPECT_EQ(r["result"], false);
  EXPECT_EQ(r["comment"], "User 'nosuchuserhere' is not available");

  write("roots/w.sh", "#!/bin/sh\nid -un\n");
  r = call("cmd.script", {{"name", "salt://w.sh"}, {"runas", "brinerunas"}, {"cwd", dir_.file("home")}});
  EXPECT_EQ(r["changes"]["stdout"], "brinerunas") << r.dump();
}

}  // namespace
}  // namespace brine::states
