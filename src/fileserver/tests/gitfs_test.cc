// gitfs over real repositories made with the git command in a temp dir.
#include "fileserver/gitfs.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "fileserver/roots.h"
#include "fileserver/serve.h"
#include "fileserver/tests/tree.h"

namespace brine::fileserver {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

using test_tree::temp_dir;
using test_tree::write;

// Runs git in `dir`; its output, or a test failure.
std::string git(const fs::path& dir, const std::string& args) {
  std::string cmd = "git -C '" + dir.string() +
                    "' -c user.name=brine -c user.email=brine@example.test "
                    "-c init.defaultBranch=master -c commit.gpgsign=false " +
                    args + " 2>&1";
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) {
    ADD_FAILURE() << "cannot run " << cmd;
    return out;
  }
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  int rc = ::pclose(p);
  EXPECT_EQ(rc, 0) << cmd << "\n" << out;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// A repository: master with files, an executable, links in and out, a
// subdirectory; branch dev and tag v1.
struct repo {
  temp_dir t;
  fs::path dir = t.path() / "repo";
  fs::path cache = t.path() / "cache";

  repo() {
    ::umask(022);
    fs::create_directories(dir);
    git(dir, "init -q");
    write(dir / "top.sls", "base:\n  '*': [web]\n");
    write(dir / "web/init.sls", "web state\n");
    write(dir / "web/files/run.sh", "#!/bin/sh\necho hi\n");
    fs::permissions(dir / "web/files/run.sh",
                    fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec,
                    fs::perm_options::add);
    write(dir / "sub/inner.txt", "inner\n");
    write(dir / "sub/deep/more.txt", "more\n");
    fs::create_symlink("web/init.sls", dir / "alias.sls");   // inside: served
    fs::create_symlink("web", dir / "webdir");               // a directory inside
    fs::create_symlink("../../etc/passwd", dir / "escape");  // leaves the tree
    fs::create_symlink("/etc/passwd", dir / "absolute");     // absolute
    fs::create_symlink("../top.sls", dir / "sub/up.sls");    // inside the repo, not sub/
    git(dir, "add -A");
    git(dir, "commit -q -m one");
    git(dir, "tag v1");
    git(dir, "checkout -q -b dev");
    write(dir / "top.sls", "dev top\n");
    git(dir, "commit -q -am dev");
    git(dir, "checkout -q master");
  }
  std::string head(const std::string& ref) { return git(dir, "rev-parse " + ref + "^{commit}"); }
};

std::vector<std::string> paths(const manifest& m) {
  std::vector<std::string> out;
  for (const auto& e : m.files) out.push_back(e.path);
  return out;
}

const gitfs_pin* pin_of(const std::vector<gitfs_pin>& pins, const std::string& env) {
  for (const auto& p : pins) {
    if (p.saltenv == env) return &p;
  }
  return nullptr;
}

TEST(GitFs, BranchesAndTagsAreSaltenvs) {
  repo r;
  gitfs g({{r.dir.string(), "", "", "master"}}, r.cache.string());
  auto f = g.fetch();
  EXPECT_TRUE(f.errors.empty()) << f.errors.front();
  ASSERT_EQ(f.pins.size(), 3u);
  ASSERT_TRUE(pin_of(f.pins, "base"));
  EXPECT_EQ(pin_of(f.pins, "base")->commit, r.head("master"));
  EXPECT_EQ(pin_of(f.pins, "base")->ref, "refs/heads/master");
  EXPECT_EQ(pin_of(f.pins, "dev")->commit, r.head("dev"));
  EXPECT_EQ(pin_of(f.pins, "v1")->ref, "refs/tags/v1");
  EXPECT_FALSE(pin_of(f.pins, "master"));  // served as base

  // Nothing is served before apply().
  EXPECT_TRUE(g.envs().empty());
  EXPECT_TRUE(g.apply(f.pins).empty());
  EXPECT_EQ(g.envs(), (std::vector<std::string>{"base", "dev", "v1"}));
  EXPECT_EQ(g.read("base", "top.sls", 0, 100).data, "base:\n  '*': [web]\n");
  EXPECT_EQ(g.read("dev", "top.sls", 0, 100).data, "dev top\n");
  EXPECT_EQ(g.read("v1", "top.sls", 0, 100).data, "base:\n  '*': [web]\n");
  EXPECT_EQ(g.read("base", "web/init.sls", 4, 3).data, "sta");
  EXPECT_EQ(g.read("base", "web/files/run.sh", 0, 100).mode, 0755u);
  EXPECT_EQ(g.list("base")->find("top.sls")->mode, 0644u);
  EXPECT_EQ(g.clone_dir(r.cache.string(), r.dir.string()).rfind(r.cache.string() + "/gitfs/", 0),
            0u);
  EXPECT_TRUE(fs::exists(gitfs::clone_dir(r.cache.string(), r.dir.string()) + "/HEAD"));
}

TEST(GitFs, ListingAndHashesEqualRootsOverTheSameTreeCheckedOut) {
  repo r;
  gitfs g({{r.dir.string(), "", "", "master"}}, r.cache.string());
  g.apply(g.fetch().pins);
  fs::path out = r.t.path() / "checkout";
  fs::create_directories(out);
  git(r.dir, "--work-tree='" + out.string() + "' checkout master -- .");
  roots plain({{"base", {out.string()}}}, std::chrono::milliseconds(0));
  auto want = plain.list("base");
  auto got = g.list("base");
  EXPECT_EQ(paths(*got), paths(*want));
  EXPECT_EQ(paths(*got),
            (std::vector<std::string>{"alias.sls", "sub/deep/more.txt", "sub/inner.txt",
                                      "sub/up.sls", "top.sls", "web/files/run.sh", "web/init.sls",
                                      "webdir/files/run.sh", "webdir/init.sls"}));
  ASSERT_EQ(got->files.size(), want->files.size());
  for (size_t i = 0; i < got->files.size(); ++i) {
    EXPECT_EQ(got->files[i].hash, want->files[i].hash) << got->files[i].path;
    EXPECT_EQ(got->files[i].size, want->files[i].size) << got->files[i].path;
    EXPECT_EQ(got->files[i].mode, want->files[i].mode) << got->files[i].path;
  }
  EXPECT_EQ(got->dirs, want->dirs);
  EXPECT_EQ(got->revision, want->revision);
  // A symlink is served with its target's bytes, as roots does.
  EXPECT_EQ(g.read("base", "alias.sls", 0, 100).data, "web state\n");
  EXPECT_EQ(g.read("base", "sub/up.sls", 0, 100).data, "base:\n  '*': [web]\n");
  EXPECT_NE(g.read("base", "escape", 0, 100).error, "");
  EXPECT_NE(g.read("base", "absolute", 0, 100).error, "");
}

TEST(GitFs, RootAndMountpoint) {
  repo r;
  gitfs g({{r.dir.string(), "sub", "salt://formulas/x/", "master"}}, r.cache.string());
  g.apply(g.fetch().pins);
  auto m = g.list("base");
  EXPECT_EQ(paths(*m),
            (std::vector<std::string>{"formulas/x/deep/more.txt", "formulas/x/inner.txt"}));
  EXPECT_EQ(m->dirs, (std::vector<std::string>{"formulas", "formulas/x", "formulas/x/deep"}));
  EXPECT_EQ(g.read("base", "formulas/x/inner.txt", 0, 100).data, "inner\n");
  // sub/up.sls leads out of the root `sub`: not served.
  EXPECT_NE(g.read("base", "formulas/x/up.sls", 0, 100).error, "");
  EXPECT_NE(g.read("base", "inner.txt", 0, 100).error, "");

  EXPECT_THROW(gitfs({{r.dir.string(), "../x", "", "master"}}, r.cache.string()), base::error);
  EXPECT_THROW(gitfs({{r.dir.string(), "", "a/../..", "master"}}, r.cache.string()), base::error);
  EXPECT_THROW(gitfs({{"", "", "", "master"}}, r.cache.string()), base::error);
}

TEST(GitFs, ServesThroughTheFileRequestContract) {
  repo r;
  gitfs g({{r.dir.string(), "", "", "master"}}, r.cache.string());
  g.apply(g.fetch().pins);
  json envs = serve(g, {{"op", "envs"}}, 1024);
  EXPECT_EQ(envs["envs"], json({"base", "dev", "v1"}));
  json l = serve(g, {{"op", "list"}, {"saltenv", "base"}}, 1024);
  ASSERT_TRUE(l.contains("files")) << l.dump();
  json again = serve(g, {{"op", "list"}, {"saltenv", "base"}, {"revision", l["revision"]}}, 1024);
  EXPECT_TRUE(again.value("unchanged", false));
  json got =
      serve(g,
            {{"op", "get"},
             {"saltenv", "base"},
             {"files", json::array({json::array({"top.sls", 0}), json::array({"../etc/passwd", 0}),
                                    json::array({"missing.sls", 0}), json::array({"escape", 0})})}},
            1024);
  ASSERT_EQ(got["files"].size(), 4u) << got.dump();
  auto data = got["files"][0]["data"].get_binary();
  EXPECT_EQ(std::string(data.begin(), data.end()), "base:\n  '*': [web]\n");
  EXPECT_EQ(got["files"][0]["hash"], hash_bytes("base:\n  '*': [web]\n"));
  EXPECT_TRUE(got["files"][1]["error"].get<std::string>().starts_with("refused"));
  EXPECT_TRUE(got["files"][2].contains("error"));
  EXPECT_TRUE(got["files"][3].contains("error"));
  EXPECT_EQ(serve(g, {{"op", "list"}, {"saltenv", "nope"}}, 1024)["files"].size(), 0u);
}

TEST(GitFs, SwitchesOnlyToCommitsItHasAndSaysWhyNot) {
  repo r;
  gitfs g({{r.dir.string(), "", "", "master"}}, r.cache.string());
  auto first = g.fetch().pins;
  g.apply(first);
  std::string rev = g.list("base")->revision;

  // A new commit, pinned by another master: this one fetches it on apply.
  write(r.dir / "top.sls", "two\n");
  write(r.dir / "web/init.sls", "web two\n");
  git(r.dir, "commit -q -am two");
  auto second = first;
  for (auto& p : second) {
    if (p.saltenv == "base") p.commit = r.head("master");
  }
  EXPECT_TRUE(g.apply(second).empty());
  EXPECT_EQ(g.read("base", "top.sls", 0, 100).data, "two\n");
  EXPECT_EQ(g.read("base", "web/init.sls", 0, 100).data, "web two\n");
  EXPECT_NE(g.list("base")->revision, rev);
  EXPECT_EQ(g.pins(), second);

  // A commit the remote does not have: the current revision stays.
  auto bad = second;
  for (auto& p : bad) {
    if (p.saltenv == "base") p.commit = std::string(40, 'e');
  }
  auto problems = g.apply(bad);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find(r.dir.string()), std::string::npos) << problems[0];
  EXPECT_NE(problems[0].find("keeps serving"), std::string::npos) << problems[0];
  EXPECT_EQ(g.read("base", "top.sls", 0, 100).data, "two\n");
  EXPECT_EQ(g.pins(), second);

  // Back to the first pins: served from the clone without a fetch.
  EXPECT_TRUE(g.apply(first).empty());
  EXPECT_EQ(g.read("base", "top.sls", 0, 100).data, "base:\n  '*': [web]\n");
  EXPECT_EQ(g.list("base")->revision, rev);
}

TEST(GitFs, BadRemotesAndAMissingBaseBranchAreNamed) {
  repo r;
  gitfs g({{(r.t.path() / "no-such-repo").string(), "", "", "master"},
           {r.dir.string(), "", "", "main"}},
          r.cache.string());
  auto f = g.fetch();
  ASSERT_EQ(f.errors.size(), 2u);
  EXPECT_NE(f.errors[0].find("no-such-repo"), std::string::npos) << f.errors[0];
  EXPECT_NE(f.errors[0].find("gitfs_remotes"), std::string::npos) << f.errors[0];
  std::string base_error =
      f.errors[0].find("gitfs_base") != std::string::npos ? f.errors[0] : f.errors[1];
  EXPECT_NE(base_error.find("'main' (gitfs_base) not found"), std::string::npos) << base_error;
  EXPECT_NE(base_error.find("dev, master"), std::string::npos) << base_error;
  // The reachable remote is still pinned: its branches (master by name now) and tag.
  EXPECT_EQ(f.remotes, std::vector<std::string>{r.dir.string()});
  EXPECT_TRUE(pin_of(f.pins, "master"));
  EXPECT_FALSE(pin_of(f.pins, "base"));

  gitfs unreachable({{"https://127.0.0.1:1/nothing.git", "", "", "master"}}, r.cache.string());
  auto u = unreachable.fetch();
  ASSERT_EQ(u.errors.size(), 1u);
  EXPECT_NE(u.errors[0].find("cannot fetch"), std::string::npos) << u.errors[0];
  EXPECT_TRUE(u.remotes.empty());
}

TEST(GitFs, CredentialsSaltWouldRefuseStopItNamingTheOption) {
  repo r;
  auto refusal = [&](std::vector<gitfs_remote> remotes) -> std::string {
    try {
      gitfs g(std::move(remotes), r.cache.string());
    } catch (const base::error& e) {
      return e.what();
    }
    return "";
  };
  gitfs_remote plain{"http://127.0.0.1:1/private.git", "", "", "master"};
  plain.auth = {.user = "alice", .password = "hunter2"};
  std::string e = refusal({plain});
  EXPECT_NE(e.find("gitfs_remotes http://127.0.0.1:1/private.git: a password over plain http:// "
                   "is refused"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("gitfs_insecure_auth"), std::string::npos) << e;
  EXPECT_EQ(e.find("hunter2"), std::string::npos) << e;
  plain.auth.insecure_auth = true;
  EXPECT_EQ(refusal({plain}), "");
  // One clone per URL: its entries must agree on the credentials.
  gitfs_remote other = plain;
  other.auth.password = "other";
  e = refusal({plain, other});
  EXPECT_NE(e.find("listed twice with different credentials"), std::string::npos) << e;
  EXPECT_EQ(e.find("hunter2"), std::string::npos) << e;
  // A local path takes no credentials (as in Salt): the global ones do not stop it.
  gitfs_remote local{r.dir.string(), "", "", "master"};
  local.auth = {.user = "alice"};
  EXPECT_EQ(refusal({local}), "");
}

TEST(GitFs, LayeredAfterRootsTheFirstBackendWins) {
  repo r;
  gitfs g({{r.dir.string(), "", "", "master"}}, r.cache.string());
  g.apply(g.fetch().pins);
  write(r.t.path() / "roots/top.sls", "from roots\n");
  roots plain(
      {{"base", {(r.t.path() / "roots").string()}}, {"extra", {(r.t.path() / "roots").string()}}},
      std::chrono::milliseconds(0));
  layered both({&plain, &g});
  EXPECT_EQ(both.envs(), (std::vector<std::string>{"base", "dev", "extra", "v1"}));
  EXPECT_EQ(both.read("base", "top.sls", 0, 100).data, "from roots\n");
  EXPECT_EQ(both.read("base", "web/init.sls", 0, 100).data, "web state\n");
  auto m = both.list("base");
  EXPECT_EQ(m->find("top.sls")->hash, hash_bytes("from roots\n"));
  EXPECT_TRUE(m->find("web/init.sls"));
  layered git_first({&g, &plain});
  EXPECT_EQ(git_first.read("base", "top.sls", 0, 100).data, "base:\n  '*': [web]\n");
}

}  // namespace
}  // namespace brine::fileserver
