// Tests of the alternatives module: links read from a temp directory, and a
// fake update-alternatives (a shell script in the temp directory) that
// records its arguments and answers as the real one does. Read-only
// functions are also checked against this machine's update-alternatives
// when it has the pager alternative.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "modules/alternatives.h"
#include "modules/context.h"
#include "modules/registry.h"
#include "modules/tests/test_util.h"

namespace brine::modules {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

// update-alternatives as Debian's answers for the alternative `editor`
// (and fails for any other name); it records its arguments and LC_ALL.
constexpr const char* k_fake_tool = R"sh(#!/bin/sh
here=$(dirname "$0")
printf '%s\n' "$(basename "$0")" "$@" > "$here/args"
printf '%s' "$LC_ALL" > "$here/lc_all"
if [ "$2" != editor ] && [ "$3" != editor ]; then
  echo "update-alternatives: error: no alternatives for $2" >&2
  exit 2
fi
case "$1" in
  --query)
    printf 'Name: editor\nLink: /usr/bin/editor\nSlaves:\n editor.1.gz /usr/share/man/man1/editor.1.gz\nStatus: auto\nBest: /usr/bin/vim.basic\nValue: /usr/bin/vim.basic\n\nAlternative: /bin/nano\nPriority: 40\nLink: /not/this/one\n' ;;
  --display)
    printf 'editor - auto mode\n  link best version is /usr/bin/vim.basic\n  link currently points to /usr/bin/vim.basic\n  link editor is /usr/bin/editor\n/bin/nano - priority 40\n/usr/bin/vim.basic - priority 50\n\n' ;;
  --set)
    if [ "$3" = /bad ]; then
      echo "update-alternatives: error: alternative /bad for editor not registered; not setting" >&2
      exit 2
    fi
    echo "update-alternatives: using $3 to provide /usr/bin/editor (editor) in manual mode" ;;
  --install)
    echo "installed $3 at $2 from $4 priority $5" ;;
  --remove|--auto)
    echo "ok $1" ;;
esac
)sh";

class alternatives_test : public testing::module_test {
 protected:
  alternatives_test() : module_test([](registry&) {}) {
    paths_.links = dir_.path() + "/etc-alternatives";
    paths_.redhat_admin = dir_.path() + "/var-lib-alternatives";
    paths_.suse_admin = dir_.path() + "/var-lib-rpm-alternatives";
    paths_.tool_dir = dir_.path() + "/bin";
    for (const auto& d : {paths_.links, paths_.redhat_admin, paths_.suse_admin, paths_.tool_dir}) {
      fs::create_directories(d);
    }
    fs::create_symlink("/usr/bin/vim.basic", paths_.links + "/editor");
    std::ofstream(paths_.links + "/plainfile") << "not a link\n";
    for (const char* tool : {"update-alternatives", "alternatives"}) {
      std::string path = paths_.tool_dir + "/" + tool;
      std::ofstream(path) << k_fake_tool;
      ::chmod(path.c_str(), 0755);
    }
    register_alternatives_module(reg_, paths_);
  }

  outcome run(std::string fun, json args = json::array(), json kwargs = json::object()) {
    call c = make_call(std::move(fun), std::move(args), std::move(kwargs));
    if (with_context_) c.context = &ctx_;
    return execute_call(std::move(c));
  }
  // The fake tool's argv (its own name first) of the last run.
  std::string tool_args() const {
    std::ifstream in(paths_.tool_dir + "/args");
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  void set_os_family(const std::string& family) {
    ctx_.grains_["os_family"] = family;
    with_context_ = true;
  }

  class fake_context : public minion_context {
   public:
    explicit fake_context(const registry& reg) : reg_(reg) {}
    const std::string& id() const override { return id_; }
    std::shared_ptr<const json> grains() const override { return std::make_shared<json>(grains_); }
    std::shared_ptr<const json> pillar() const override { return std::make_shared<json>(); }
    const json& opts() const override { return opts_; }
    std::string grains_file() const override { return ""; }
    const registry& functions() const override { return reg_; }
    void refresh_grains() override {}
    bool refresh_pillar(std::string&) override { return false; }
    std::vector<running_job> running() const override { return {}; }
    bool kill_job(const std::string&) override { return false; }
    json grains_ = json::object();

   private:
    const registry& reg_;
    std::string id_ = "m1";
    json opts_ = json::object();
  };

  testing::temp_dir dir_;
  alternatives_paths paths_;
  fake_context ctx_{reg_};
  bool with_context_ = false;
};

TEST_F(alternatives_test, every_function_is_registered_with_a_cli_example) {
  for (const char* fun :
       {"alternatives.show_current", "alternatives.show_link", "alternatives.display",
        "alternatives.check_exists", "alternatives.check_installed", "alternatives.install",
        "alternatives.remove", "alternatives.auto", "alternatives.set"}) {
    ASSERT_NE(reg_.find(fun), nullptr) << fun;
    EXPECT_TRUE(reg_.doc(fun).starts_with(fun)) << reg_.doc(fun);
    EXPECT_CONTAINS(reg_.doc(fun), "brine cmd '*' " + std::string(fun));
  }
}

TEST_F(alternatives_test, show_current_is_the_link_target_or_false) {
  outcome o = run("alternatives.show_current", {"editor"});
  EXPECT_TRUE(o.success);
  EXPECT_EQ(o.ret, "/usr/bin/vim.basic");
  // No link, or a file that is not one: False, and the job still succeeds
  // (Salt only logs an error).
  for (const char* name : {"php", "plainfile", ""}) {
    o = run("alternatives.show_current", {name});
    EXPECT_TRUE(o.success) << name;
    EXPECT_EQ(o.ret, false) << name;
  }
  EXPECT_EQ(run("alternatives.show_current", json::array(), {{"name", "editor"}}).ret,
            "/usr/bin/vim.basic");
  o = run("alternatives.show_current");
  EXPECT_FALSE(o.success);
  EXPECT_CONTAINS(o.ret.get<std::string>(), "name");
}

TEST_F(alternatives_test, check_installed_compares_the_target) {
  EXPECT_EQ(run("alternatives.check_installed", {"editor", "/usr/bin/vim.basic"}).ret, true);
  EXPECT_EQ(run("alternatives.check_installed", {"editor", "/bin/nano"}).ret, false);
  EXPECT_EQ(run("alternatives.check_installed", {"php", "/usr/bin/php8.2"}).ret, false);
}

TEST_F(alternatives_test, without_the_alternatives_directory_every_function_says_so) {
  fs::remove_all(paths_.links);
  for (const char* fun : {"alternatives.show_current", "alternatives.display",
                          "alternatives.auto", "alternatives.show_link"}) {
    outcome o = run(fun, {"editor"});
    EXPECT_FALSE(o.success) << fun;
    EXPECT_CONTAINS(o.ret.get<std::string>(), "is not a directory");
  }
}

TEST_F(alternatives_test, show_link_reads_the_query_on_debian) {
  EXPECT_EQ(run("alternatives.show_link", {"editor"}).ret, "/usr/bin/editor");
  EXPECT_EQ(tool_args(), "update-alternatives\n--query\neditor\n");
  std::ifstream lc(paths_.tool_dir + "/lc_all");
  std::string lc_all;
  lc >> lc_all;
  EXPECT_EQ(lc_all, "C");
  outcome o = run("alternatives.show_link", {"nope"});
  EXPECT_TRUE(o.success);
  EXPECT_EQ(o.ret, false);
}

TEST_F(alternatives_test, show_link_reads_the_admin_file_on_redhat_and_suse) {
  std::ofstream(paths_.redhat_admin + "/java") << "auto\n/usr/bin/java\n\n/usr/lib/jvm/x/bin/java\n";
  std::ofstream(paths_.redhat_admin + "/short") << "auto\n";
  std::ofstream(paths_.suse_admin + "/java") << "manual\r\n/usr/bin/java-suse\r\n";
  set_os_family("RedHat");
  EXPECT_EQ(run("alternatives.show_link", {"java"}).ret, "/usr/bin/java");
  EXPECT_EQ(run("alternatives.show_link", {"short"}).ret, false);
  EXPECT_EQ(run("alternatives.show_link", {"missing"}).ret, false);
  set_os_family("Suse");
  // splitlines(True) keeps "\r\n" and Salt strips only the '\n'.
  EXPECT_EQ(run("alternatives.show_link", {"java"}).ret, "/usr/bin/java-suse\r");
}

TEST_F(alternatives_test, display_and_check_exists) {
  outcome o = run("alternatives.display", {"editor"});
  EXPECT_TRUE(o.success);
  // Right-stripped, as cmd.run_all gives it.
  EXPECT_TRUE(o.ret.get<std::string>().starts_with("editor - auto mode\n"));
  EXPECT_TRUE(o.ret.get<std::string>().ends_with("/usr/bin/vim.basic - priority 50"));
  EXPECT_EQ(tool_args(), "update-alternatives\n--display\neditor\n");
  o = run("alternatives.display", {"nope"});
  EXPECT_TRUE(o.success);  // Salt ignores the retcode here
  EXPECT_EQ(o.ret, "update-alternatives: error: no alternatives for nope");

  EXPECT_EQ(run("alternatives.check_exists", {"editor", "/bin/nano"}).ret, true);
  EXPECT_EQ(run("alternatives.check_exists", {"editor", "/usr/bin/vim"}).ret, true);  // a prefix
  EXPECT_EQ(run("alternatives.check_exists", {"editor", "/usr/bin/emacs"}).ret, false);
  EXPECT_EQ(run("alternatives.check_exists", {"nope", "/bin/nano"}).ret, false);
}

TEST_F(alternatives_test, changes_run_the_tool_and_fail_the_job_when_it_fails) {
  outcome o = run("alternatives.set", {"editor", "/bin/nano"});
  EXPECT_TRUE(o.success);
  EXPECT_EQ(o.ret, "update-alternatives: using /bin/nano to provide /usr/bin/editor (editor) in "
                   "manual mode");
  EXPECT_EQ(tool_args(), "update-alternatives\n--set\neditor\n/bin/nano\n");

  o = run("alternatives.set", {"editor", "/bad"});
  EXPECT_FALSE(o.success);
  EXPECT_EQ(o.retcode, 2);
  EXPECT_EQ(o.ret,
            "update-alternatives: error: alternative /bad for editor not registered; not setting");

  o = run("alternatives.install", {"editor", "/usr/bin/editor", "/usr/bin/emacs", 50});
  EXPECT_TRUE(o.success);
  EXPECT_EQ(o.ret, "installed editor at /usr/bin/editor from /usr/bin/emacs priority 50");
  EXPECT_EQ(tool_args(),
            "update-alternatives\n--install\n/usr/bin/editor\neditor\n/usr/bin/emacs\n50\n");

  EXPECT_EQ(run("alternatives.remove", {"editor", "/usr/bin/emacs"}).ret, "ok --remove");
  EXPECT_EQ(tool_args(), "update-alternatives\n--remove\neditor\n/usr/bin/emacs\n");
  EXPECT_EQ(run("alternatives.auto", {"editor"}).ret, "ok --auto");
  EXPECT_EQ(tool_args(), "update-alternatives\n--auto\neditor\n");

  o = run("alternatives.auto", {"nope"});
  EXPECT_FALSE(o.success);
  EXPECT_EQ(o.ret, "update-alternatives: error: no alternatives for nope");
}

TEST_F(alternatives_test, redhat_runs_alternatives) {
  set_os_family("RedHat");
  run("alternatives.auto", {"editor"});
  EXPECT_EQ(tool_args(), "alternatives\n--auto\neditor\n");
  set_os_family("Debian");
  run("alternatives.auto", {"editor"});
  EXPECT_EQ(tool_args(), "update-alternatives\n--auto\neditor\n");
}

TEST_F(alternatives_test, bad_arguments_name_the_argument) {
  EXPECT_CONTAINS(error_of("alternatives.set", {"--remove-all", "x"}), "name must not start with '-'");
  EXPECT_CONTAINS(error_of("alternatives.set", {"editor"}), "path");
  EXPECT_CONTAINS(error_of("alternatives.install", {"editor", "/usr/bin/editor", "/x", json::array()}),
                  "priority");
  EXPECT_CONTAINS(error_of("alternatives.auto", {"editor", "extra"}), "alternatives.auto");
  EXPECT_TRUE(tool_args().empty());  // none of them ran the tool
}

// Against this machine: read-only, and only where Debian's pager alternative
// exists.
TEST(alternatives_host, read_only_functions_agree_with_update_alternatives) {
  char target[4096];
  ssize_t n = ::readlink("/etc/alternatives/pager", target, sizeof target);
  if (n <= 0 || ::access("/usr/bin/update-alternatives", X_OK) != 0) {
    GTEST_SKIP() << "no pager alternative here";
  }
  std::string current(target, static_cast<std::size_t>(n));
  registry reg;
  register_alternatives_module(reg);
  auto run = [&](const char* fun, json args) {
    return testing::run_sync(execute(reg, testing::make_call(fun, std::move(args)))).ret;
  };
  EXPECT_EQ(run("alternatives.show_current", {"pager"}), current);
  EXPECT_EQ(run("alternatives.check_installed", {"pager", current}), true);
  EXPECT_EQ(run("alternatives.show_link", {"pager"}), "/usr/bin/pager");
  EXPECT_EQ(run("alternatives.check_exists", {"pager", current}), true);
  EXPECT_CONTAINS(run("alternatives.display", {"pager"}).get<std::string>(), "link pager is");
  EXPECT_EQ(run("alternatives.show_link", {"brine-no-such-alternative"}), false);
  EXPECT_EQ(run("alternatives.show_current", {"brine-no-such-alternative"}), false);
}

}  // namespace
}  // namespace brine::modules
