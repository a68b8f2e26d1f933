// Tests of the shadow module's functions that need no account of their
// own: gen_password against Python's crypt.crypt (the hashes below are what
// it printed), lock/unlock of a user the test creates and deletes itself.

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "modules/registry.h"
#include "modules/tests/test_util.h"

namespace brine::modules {
namespace {

using namespace testing;
using json = nlohmann::json;

class shadow_mod_test : public module_test {
 protected:
  shadow_mod_test() : module_test(register_shadow_module) {}
};

TEST_F(shadow_mod_test, gen_password_with_a_salt_is_crypts_hash) {
  EXPECT_EQ(ret("shadow.gen_password", {"I_am_password"},
                {{"crypt_salt", "I_am_salt"}, {"algorithm", "sha256"}}),
            "$5$I_am_salt$FnWvOIJn1F6zDPIqTV2zjq52vBNkOvorjARGDrLPDKA");
  EXPECT_EQ(ret("shadow.gen_password", {"I_am_password"}, {{"crypt_salt", "I_am_salt"}}),
            "$6$I_am_salt$HCPX524SwPwoX9OqJ264.NVY1NUPvv5nJKDvzpzlA6fi0x2BtiMYJq9vfSxCgmCchFAgWqbUB"
            "aExffAL0csFD0");
  EXPECT_EQ(ret("shadow.gen_password", {"secret"}, {{"crypt_salt", "abc"}, {"algorithm", "md5"}}),
            "$1$abc$iCQ2D3nhptRYi27fDYv2s1");
  EXPECT_EQ(ret("shadow.gen_password", {"secret"}, {{"crypt_salt", "ab"}, {"algorithm", "crypt"}}),
            "abNANd1rDfiNc");
}

TEST_F(shadow_mod_test, gen_password_without_a_salt_draws_one) {
  std::string a = ret("shadow.gen_password", {"secret"}).get<std::string>();
  std::string b = ret("shadow.gen_password", {"secret"}).get<std::string>();
  ASSERT_TRUE(a.starts_with("$6$")) << a;
  EXPECT_EQ(a.find('$', 3), 3 + 16) << a;  // 16 characters of salt, as crypt.mksalt
  EXPECT_NE(a, b);
  std::string salt = a.substr(3, 16);
  EXPECT_EQ(ret("shadow.gen_password", {"secret"}, {{"crypt_salt", salt}}), a);
}

TEST_F(shadow_mod_test, gen_password_refuses_what_salt_refuses) {
  EXPECT_NE(error_of("shadow.gen_password", {"x"}, {{"algorithm", "sha1"}})
                .find("Algorithm 'sha1' is not supported"),
            std::string::npos);
  EXPECT_NE(error_of("shadow.gen_password", {"x"}, {{"crypt_salt", "abc"}, {"algorithm", "crypt"}})
                .find("'crypt' salt must be 2 characters"),
            std::string::npos);
  EXPECT_NE(error_of("shadow.gen_password", {"x"}, {{"crypt_salt", "a$b"}}).find("crypt_salt"),
            std::string::npos);
  EXPECT_NE(error_of("shadow.gen_password", json::array()).find("needs the clear text"),
            std::string::npos);
}

TEST_F(shadow_mod_test, lock_and_unlock_a_password) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to add a user";
  std::string name = "brinesh" + std::to_string(::getpid() % 100000);
  run_argv({"useradd", "-M", "-p", "$6$abc$def", name}, 60s);
  EXPECT_EQ(ret("shadow.lock_password", {name}), true);
  EXPECT_EQ(ret("shadow.info", {name})["passwd"], "!$6$abc$def");
  EXPECT_EQ(ret("shadow.lock_password", {name}), true);  // already locked: nothing run
  EXPECT_EQ(ret("shadow.unlock_password", {name}), true);
  EXPECT_EQ(ret("shadow.info", {name})["passwd"], "$6$abc$def");
  run_argv({"userdel", name}, 60s);
  EXPECT_EQ(ret("shadow.lock_password", {name}), false);  // no such user
}

}  // namespace
}  // namespace brine::modules
