// Tests of the git module's functions on a checkout: git.current_branch,
// git.revision and git.checkout against a repository each test makes in its temp dir (git
// itself gives the expected answers).

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "modules/registry.h"
#include "modules/tests/test_util.h"

namespace brine::modules {
namespace {

using namespace testing;
using json = nlohmann::json;

// The first line `command` prints (sh -c), and its exit status.
std::pair<int, std::string> sh(const std::string& command) {
  std::string out;
  FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) return {-1, out};
  char buf[512];
  while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
  int status = ::pclose(p);
  if (auto nl = out.find('\n'); nl != std::string::npos) out.erase(nl);
  return {status, out};
}

class git_mod_test : public module_test {
 protected:
  git_mod_test() : module_test(register_git_module, 60s) {}
  void SetUp() override {
    if (sh("command -v git >/dev/null").first != 0) GTEST_SKIP() << "needs git";
    repo_ = dir_.file("repo");
    ASSERT_EQ(sh("git init -q -b trunk " + repo_ + " && cd " + repo_ +
                 " && git -c user.name=t -c user.email=t@example.com commit -q --allow-empty -m "
                 "one")
                  .first,
              0);
  }
  temp_dir dir_;
  std::string repo_;
};

TEST_F(git_mod_test, current_branch_names_the_checkout_or_head_when_detached) {
  EXPECT_EQ(ret("git.current_branch", {repo_}), "trunk");
  ASSERT_EQ(sh("cd " + repo_ + " && git checkout -q --detach").first, 0);
  EXPECT_EQ(ret("git.current_branch", {repo_}), "HEAD");
  EXPECT_CONTAINS(error_of("git.current_branch"), "missing argument 'cwd'");
  EXPECT_CONTAINS(error_of("git.current_branch", {dir_.path()}),
                  "Command 'git rev-parse --abbrev-ref HEAD' failed");
}

TEST_F(git_mod_test, revision_is_rev_parse) {
  std::string full = sh("git -C " + repo_ + " rev-parse HEAD").second;
  std::string shortened = sh("git -C " + repo_ + " rev-parse --short HEAD").second;
  ASSERT_EQ(full.size(), 40u);
  EXPECT_EQ(ret("git.revision", {repo_}), full);
  EXPECT_EQ(ret("git.revision", {repo_}, {{"short", true}}), shortened);
  EXPECT_EQ(ret("git.revision", {repo_}, {{"rev", "trunk"}}), full);
  EXPECT_CONTAINS(error_of("git.revision", {repo_}, {{"rev", "no-such-rev"}}),
                  "Command 'git rev-parse no-such-rev' failed");
}

TEST_F(git_mod_test, checkout_switches_and_makes_branches) {
  std::string out = ret("git.checkout", {repo_}, {{"opts", "-b feature"}});
  EXPECT_CONTAINS(out, "Switched to a new branch 'feature'");
  EXPECT_EQ(sh("git -C " + repo_ + " rev-parse --abbrev-ref HEAD").second, "feature");
  out = ret("git.checkout", {repo_}, {{"rev", "trunk"}});
  EXPECT_CONTAINS(out, "Switched to branch 'trunk'");
  EXPECT_EQ(ret("git.current_branch", {repo_}), "trunk");
  EXPECT_CONTAINS(error_of("git.checkout", {repo_}), "'rev' argument is required unless -b or -B");
  // git's message (on its stderr) is in the failure.
  EXPECT_CONTAINS(error_of("git.checkout", {repo_}, {{"rev", "nope"}}),
                  "Command 'git checkout nope' failed: error: pathspec 'nope'");
  EXPECT_CONTAINS(error_of("git.checkout", {repo_}, {{"opts", "-b 'x"}}),
                  "git.checkout: opts has an unclosed quote");
}

}  // namespace
}  // namespace brine::modules
