// Tests of the user module (user.* and group.*). Reads check accounts every
// system has (root); changes touch only a user and a group the test creates
// and deletes itself, named brinetest_<pid>.

#include <grp.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "base/error.h"
#include "modules/process.h"
#include "modules/registry.h"
#include "modules/tests/test_util.h"

namespace brine::modules {
namespace {

using namespace testing;
using json = nlohmann::json;

// Removes what a failed test may have left, without a shell; errors ignored.
void run_quietly(std::vector<std::string> argv) {
  try {
    run_argv(std::move(argv), 60s);
  } catch (const std::exception&) {
  }
}

// A gid that no group has, for group.add gid=.
gid_t unused_gid() {
  for (gid_t gid = 59999; gid > 50000; --gid) {
    if (::getgrgid(gid) == nullptr) return gid;
  }
  return 0;
}

class user_mod_test : public module_test {
 protected:
  user_mod_test() : module_test(register_user_module, 120s, 150s) {}
};

TEST_F(user_mod_test, every_function_is_registered_with_a_cli_example) {
  for (const char* fun : {"user.info", "user.list_users", "user.add", "user.delete", "group.info",
                          "group.getent", "group.add", "group.delete"}) {
    ASSERT_NE(reg_.find(fun), nullptr) << fun;
    EXPECT_TRUE(reg_.doc(fun).starts_with(fun)) << reg_.doc(fun);
    EXPECT_NE(reg_.doc(fun).find("brine cmd '*' " + std::string(fun)), std::string::npos)
        << reg_.doc(fun);
  }
}

TEST_F(user_mod_test, info_of_root) {
  outcome o = call_fn(make_call("user.info", {"root"}));
  ASSERT_TRUE(o.success) << o.ret.dump();
  const struct passwd* pw = ::getpwnam("root");
  ASSERT_NE(pw, nullptr);
  EXPECT_EQ(o.ret["name"], "root");
  EXPECT_EQ(o.ret["uid"], 0);
  EXPECT_EQ(o.ret["gid"], 0);
  EXPECT_EQ(o.ret["passwd"], pw->pw_passwd);
  EXPECT_EQ(o.ret["home"], pw->pw_dir);
  EXPECT_EQ(o.ret["shell"], pw->pw_shell);
  EXPECT_EQ(o.ret["fullname"],
            std::string(pw->pw_gecos).substr(0, std::string(pw->pw_gecos).find(',')));
  for (const char* key : {"roomnumber", "workphone", "homephone", "other"}) {
    EXPECT_TRUE(o.ret[key].is_string()) << key;
  }
  ASSERT_TRUE(o.ret["groups"].is_array());
  EXPECT_NE(std::find(o.ret["groups"].begin(), o.ret["groups"].end(), json("root")),
            o.ret["groups"].end())
      << "the primary group is listed: " << o.ret.dump();
  EXPECT_TRUE(std::is_sorted(o.ret["groups"].begin(), o.ret["groups"].end()));
  EXPECT_EQ(o.ret.size(), 12u) << o.ret.dump();
}

TEST_F(user_mod_test, info_of_a_missing_account_is_empty) {
  const std::string name = "brinetest_none_" + std::to_string(::getpid());
  EXPECT_EQ(call_fn(make_call("user.info", {name})).ret, json::object());
  EXPECT_EQ(call_fn(make_call("group.info", {name})).ret, json::object());
}

TEST_F(user_mod_test, list_users_is_sorted_and_has_root) {
  outcome o = call_fn(make_call("user.list_users"));
  ASSERT_TRUE(o.ret.is_array());
  EXPECT_NE(std::find(o.ret.begin(), o.ret.end(), json("root")), o.ret.end());
  EXPECT_TRUE(std::is_sorted(o.ret.begin(), o.ret.end()));
  EXPECT_EQ(std::adjacent_find(o.ret.begin(), o.ret.end()), o.ret.end());
}

TEST_F(user_mod_test, group_info_and_getent) {
  outcome root = call_fn(make_call("group.info", {"root"}));
  EXPECT_EQ(root.ret["name"], "root");
  EXPECT_EQ(root.ret["gid"], 0);
  EXPECT_TRUE(root.ret["passwd"].is_string());
  EXPECT_TRUE(root.ret["members"].is_array());
  EXPECT_EQ(root.ret.size(), 4u);

  outcome all = call_fn(make_call("group.getent"));
  ASSERT_TRUE(all.ret.is_array());
  auto it = std::find_if(all.ret.begin(), all.ret.end(),
                         [](const json& g) { return g.value("name", "") == "root"; });
  ASSERT_NE(it, all.ret.end());
  EXPECT_EQ(*it, root.ret);
  for (const auto& g : all.ret) EXPECT_EQ(g.size(), 4u) << g.dump();
}

TEST_F(user_mod_test, bad_arguments_name_the_argument) {
  EXPECT_NE(error_of(make_call("user.info")).find("user.info: needs the user name"),
            std::string::npos);
  EXPECT_NE(error_of(make_call("user.info", {"root", "/mnt"})).find("root is not supported"),
            std::string::npos);
  EXPECT_NE(error_of(make_call("user.info", {"root", "/mnt", 3}))
                .find("takes at most 2 positional argument(s) (accepted: name, root), got 3"),
            std::string::npos);
  EXPECT_NE(error_of(make_call("user.list_users", json::array(), {{"bogus", 1}}))
                .find("unknown keyword argument 'bogus'"),
            std::string::npos);
  EXPECT_NE(error_of(make_call("user.add")).find("user.add: needs the user name"),
            std::string::npos);
  EXPECT_NE(error_of(make_call("user.add", {"-rf"})).find("must not be empty or start with '-'"),
            std::string::npos);
  EXPECT_NE(error_of(make_call("user.add", {"a:b"})).find("must not contain ':'"),
            std::string::npos);
  EXPECT_NE(error_of(make_call("user.add", {"brinetest_x", "abc"})).find("uid must be a number"),
            std::string::npos);
  EXPECT_NE(
      error_of(make_call("user.add", {"brinetest_x"}, {{"uid", -1}})).find("uid must be a number"),
      std::string::npos);
  EXPECT_NE(error_of(make_call("user.add", {"brinetest_x"}, {{"gid", 1.5}}))
                .find("gid must be a number from 0 to 4294967294 or a group name"),
            std::string::npos);
  EXPECT_NE(error_of(make_call("user.add", {"brinetest_x"}, {{"groups", 5}}))
                .find("groups must be a list of group names"),
            std::string::npos);
  EXPECT_NE(error_of(make_call("user.add", {"brinetest_x"}, {{"createhome", "no"}}))
                .find("createhome must be true or false"),
            std::string::npos);
  EXPECT_NE(error_of(make_call("user.add", {"brinetest_x"}, {{"fullname", "Doe, John"}}))
                .find("fullname must not contain ','"),
            std::string::npos);
  EXPECT_NE(error_of(make_call("user.add", {"brinetest_x"}, {{"password", "x"}}))
                .find("unknown keyword argument 'password'"),
            std::string::npos);
  EXPECT_NE(error_of(make_call("user.delete", {"brinetest_x"}, {{"remove", "yes"}}))
                .find("remove must be true or false"),
            std::string::npos);
  EXPECT_NE(error_of(make_call("group.add", {"brinetest_x", "x1"})).find("gid must be a number"),
            std::string::npos);
  EXPECT_NE(error_of(make_call("group.delete")).find("group.delete: needs the group name"),
            std::string::npos);
  EXPECT_NE(error_of(make_call("group.getent", json::array(), {{"refresh", 1}}))
                .find("refresh must be true or false"),
            std::string::npos);
}

class user_mod_lifecycle_test : public user_mod_test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "adding users and groups needs root";
  }
  void TearDown() override {
    run_quietly({"userdel", "-r", user_});
    run_quietly({"groupdel", user_});
    run_quietly({"groupdel", group_});
    user_mod_test::TearDown();
  }

  const std::string user_ = "brinetest_" + std::to_string(::getpid());
  const std::string group_ = "brinetest_g" + std::to_string(::getpid());
  temp_dir dir_;
};

TEST_F(user_mod_lifecycle_test, group_add_info_delete) {
  const gid_t gid = unused_gid();
  ASSERT_NE(gid, 0u);
  outcome added = call_fn(make_call("group.add", {group_, gid}));
  ASSERT_TRUE(added.success) << added.ret.dump();
  EXPECT_EQ(added.ret, true);
  EXPECT_EQ(call_fn(make_call("group.info", {group_})).ret,
            (json{{"name", group_}, {"passwd", "x"}, {"gid", gid}, {"members", json::array()}}));

  outcome again = execute_call(make_call("group.add", {group_}));
  EXPECT_FALSE(again.success);
  EXPECT_EQ(again.ret,
            "ERROR: group.add " + group_ + ": groupadd exited 9: groupadd: group '" + group_ +
                "' already exists");

  outcome deleted = call_fn(make_call("group.delete", {group_}));
  EXPECT_EQ(deleted.ret, true);
  EXPECT_EQ(call_fn(make_call("group.info", {group_})).ret, json::object());
  outcome gone = execute_call(make_call("group.delete", {group_}));
  EXPECT_FALSE(gone.success);
  EXPECT_NE(gone.ret.get<std::string>().find("does not exist"), std::string::npos) << gone.ret;
}

TEST_F(user_mod_lifecycle_test, user_add_info_delete) {
  ASSERT_EQ(call_fn(make_call("group.add", {group_}, {{"system", true}})).ret, true);
  const std::string home = dir_.file("home");
  outcome added = call_fn(make_call("user.add", {user_},
                                    {{"groups", {group_}},
                                     {"home", home},
                                     {"shell", "/bin/sh"},
                                     {"fullname", "Brine Test"},
                                     {"roomnumber", 12},
                                     {"__pub_jid", "1"}}));
  ASSERT_TRUE(added.success) << added.ret.dump();
  EXPECT_EQ(added.ret, true);

  outcome info = call_fn(make_call("user.info", {user_}));
  ASSERT_FALSE(info.ret.empty());
  EXPECT_EQ(info.ret["name"], user_);
  EXPECT_EQ(info.ret["home"], home);
  EXPECT_EQ(info.ret["shell"], "/bin/sh");
  EXPECT_EQ(info.ret["fullname"], "Brine Test");
  EXPECT_EQ(info.ret["roomnumber"], "12");
  EXPECT_EQ(info.ret["workphone"], "");
  // The user's own group (USERGROUPS_ENAB on Debian) and the one asked for.
  std::vector<std::string> groups = info.ret["groups"].get<std::vector<std::string>>();
  EXPECT_NE(std::find(groups.begin(), groups.end(), group_), groups.end()) << info.ret.dump();
  EXPECT_TRUE(std::is_sorted(groups.begin(), groups.end()));
  struct stat st {};
  ASSERT_EQ(::stat(home.c_str(), &st), 0) << "createhome defaults to true";
  EXPECT_EQ(st.st_uid, info.ret["uid"].get<uid_t>());

  outcome members = call_fn(make_call("group.info", {group_}));
  EXPECT_EQ(members.ret["members"], json::array({user_}));
  outcome users = call_fn(make_call("user.list_users"));
  EXPECT_NE(std::find(users.ret.begin(), users.ret.end(), json(user_)), users.ret.end());

  outcome twice = execute_call(make_call("user.add", {user_}, {{"createhome", false}}));
  EXPECT_FALSE(twice.success);
  EXPECT_NE(twice.ret.get<std::string>().find("already exists"), std::string::npos) << twice.ret;

  outcome deleted = call_fn(make_call("user.delete", {user_}, {{"remove", true}}));
  ASSERT_TRUE(deleted.success) << deleted.ret.dump();
  EXPECT_EQ(deleted.ret, true);
  EXPECT_EQ(call_fn(make_call("user.info", {user_})).ret, json::object());
  EXPECT_FALSE(std::filesystem::exists(home)) << "remove=True deletes the home directory";

  outcome gone = execute_call(make_call("user.delete", {user_}));
  EXPECT_FALSE(gone.success);
  EXPECT_EQ(gone.ret,
            "ERROR: user.delete " + user_ + ": userdel exited 6: userdel: user '" + user_ +
                "' does not exist");
  EXPECT_EQ(call_fn(make_call("group.delete", {group_})).ret, true);
}

TEST_F(user_mod_lifecycle_test, user_add_with_uid_and_without_home) {
  outcome added = call_fn(
      make_call("user.add", {user_, 59876}, {{"createhome", false}, {"home", dir_.file("none")}}));
  if (!added.success && added.ret.get<std::string>().find("not unique") != std::string::npos) {
    GTEST_SKIP() << "uid 59876 is taken on this host";
  }
  ASSERT_TRUE(added.success) << added.ret.dump();
  outcome info = call_fn(make_call("user.info", {user_}));
  EXPECT_EQ(info.ret["uid"], 59876);
  EXPECT_FALSE(std::filesystem::exists(dir_.file("none"))) << "createhome=False";
  EXPECT_EQ(call_fn(make_call("user.delete", {user_})).ret, true);
}

}  // namespace
}  // namespace brine::modules
