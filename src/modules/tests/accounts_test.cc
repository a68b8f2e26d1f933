// Cached user and group lookups answer what NSS answers.

#include "modules/accounts.h"

#include <grp.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <unistd.h>

namespace brine::modules::accounts {
namespace {

TEST(accounts_test, answers_what_nss_answers_and_again_from_the_cache) {
  const passwd* pw = ::getpwuid(::geteuid());
  ASSERT_NE(pw, nullptr);
  for (int round = 0; round < 2; ++round) {
    auto by_uid = user_by_uid(::geteuid());
    ASSERT_TRUE(by_uid.has_value());
    EXPECT_EQ(by_uid->name, pw->pw_name);
    EXPECT_EQ(by_uid->home, pw->pw_dir);
    auto by_name = user_by_name(pw->pw_name);
    ASSERT_TRUE(by_name.has_value());
    EXPECT_EQ(by_name->uid, pw->pw_uid);
    EXPECT_EQ(by_name->gid, pw->pw_gid);
    const group* gr = ::getgrgid(pw->pw_gid);
    ASSERT_NE(gr, nullptr);
    EXPECT_EQ(group_name(pw->pw_gid), std::string(gr->gr_name));
    EXPECT_EQ(group_id(gr->gr_name), pw->pw_gid);
    EXPECT_FALSE(user_by_name("brine-no-such-user").has_value());
    EXPECT_FALSE(group_id("brine-no-such-group").has_value());
  }
  EXPECT_EQ(user_name_or_number(4294967) , "4294967");
  EXPECT_EQ(group_name_or_number(4294967), "4294967");
}

}  // namespace
}  // namespace brine::modules::accounts
