// Tests of the service module. Without systemd (containers, this build
// machine) every function must fail saying so; with systemd only read-only
// functions run, on units every systemd host has, and a start of a unit that
// does not exist.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "base/error.h"
#include "modules/registry.h"
#include "modules/tests/test_util.h"

namespace brine::modules {
namespace {

using namespace testing;
using json = nlohmann::json;

bool systemd_running() {
  struct stat st {};
  return ::stat("/run/systemd/system", &st) == 0 && S_ISDIR(st.st_mode);
}

const std::string k_missing_unit = "brine-no-such-unit-" + std::to_string(::getpid());

class service_mod_test : public module_test {
 protected:
  service_mod_test() : module_test(register_service_module, 120s, 150s) {}
};

const char* const k_unit_functions[] = {"service.start",   "service.stop",    "service.restart",
                                        "service.reload",  "service.status",  "service.enable",
                                        "service.disable", "service.enabled", "service.available"};

TEST_F(service_mod_test, every_function_is_registered_with_a_cli_example) {
  for (const char* fun : k_unit_functions) {
    ASSERT_NE(reg_.find(fun), nullptr) << fun;
    EXPECT_TRUE(reg_.doc(fun).starts_with(fun)) << reg_.doc(fun);
    EXPECT_NE(reg_.doc(fun).find("brine cmd '*' " + std::string(fun)), std::string::npos)
        << reg_.doc(fun);
  }
  ASSERT_NE(reg_.find("service.get_all"), nullptr);
  EXPECT_NE(reg_.doc("service.get_all").find("brine cmd '*' service.get_all"), std::string::npos);
}

TEST_F(service_mod_test, without_systemd_every_function_says_so) {
  if (systemd_running()) GTEST_SKIP() << "needs a host without systemd; this one runs it, and the "
                                      "service_mod_systemd_test cases ran instead";
  for (const char* fun : k_unit_functions) {
    outcome o = execute_call(make_call(fun, {"ssh"}));
    EXPECT_FALSE(o.success) << fun;
    EXPECT_EQ(o.retcode, 1) << fun;
    EXPECT_EQ(o.ret, "ERROR: " + std::string(fun) +
                         ": systemd is not running on this host (/run/systemd/system is "
                         "missing); the service module manages systemd services only")
        << fun;
  }
  outcome all = call_fn(make_call("service.get_all"));
  EXPECT_FALSE(all.success);
  EXPECT_NE(all.ret.get<std::string>().find("systemd is not running on this host"),
            std::string::npos);
}

TEST_F(service_mod_test, bad_arguments_name_the_argument) {
  // Checked before anything else, with or without systemd.
  for (const char* fun : k_unit_functions) {
    EXPECT_NE(error_of(make_call(fun)).find(std::string(fun) + ": needs the name of a service"),
              std::string::npos)
        << fun;
    EXPECT_NE(error_of(make_call(fun, {"--now"})).find("name must be a unit name"),
              std::string::npos)
        << fun;
    EXPECT_NE(error_of(make_call(fun, {"ssh"}, {{"bogus", 1}}))
                  .find("unknown keyword argument "
                        "'bogus'"),
              std::string::npos)
        << fun;
  }
  EXPECT_NE(error_of(make_call("service.start", {"ssh"}, {{"no_block", "yes"}}))
                .find("service.start: no_block must be true or false"),
            std::string::npos);
  EXPECT_NE(error_of(make_call("service.restart", {"ssh", true, "no"}))
                .find("unmask must be true or false"),
            std::string::npos);
  EXPECT_NE(error_of(make_call("service.stop", {"ssh"}, {{"unmask", true}}))
                .find("unknown keyword argument 'unmask' (accepted: name, no_block)"),
            std::string::npos);
  EXPECT_NE(error_of(make_call("service.start", {"two words"})).find("without spaces"),
            std::string::npos);
  EXPECT_NE(error_of(make_call("service.status", {"ssh"}, {{"name", "ssh"}})).find("given twice"),
            std::string::npos);
  EXPECT_NE(error_of(make_call("service.get_all", {"ssh"}))
                .find("takes at most 0 positional argument(s)"),
            std::string::npos);
}

class service_mod_systemd_test : public service_mod_test {
 protected:
  void SetUp() override {
    if (!systemd_running()) GTEST_SKIP() << "needs systemd running as this host's init (PID 1) to ask systemctl; "
                       "this host has none (a container): without_systemd_every_function_says_so "
                       "tested that case";
  }
};

TEST_F(service_mod_systemd_test, get_all_lists_sorted_service_names) {
  outcome o = call_fn(make_call("service.get_all"));
  ASSERT_TRUE(o.success) << o.ret.dump();
  ASSERT_TRUE(o.ret.is_array());
  EXPECT_FALSE(o.ret.empty());
  std::string previous;
  for (const auto& name : o.ret) {
    ASSERT_TRUE(name.is_string());
    const std::string n = name.get<std::string>();
    EXPECT_FALSE(n.ends_with(".service")) << n;
    EXPECT_LT(previous, n);
    previous = n;
  }
  EXPECT_NE(std::find(o.ret.begin(), o.ret.end(), json("systemd-journald")), o.ret.end());
}

TEST_F(service_mod_systemd_test, status_enabled_available_of_the_journal) {
  EXPECT_EQ(call_fn(make_call("service.status", {"systemd-journald"})).ret, true);
  EXPECT_EQ(call_fn(make_call("service.status", {"systemd-journald.service"})).ret, true);
  EXPECT_EQ(call_fn(make_call("service.available", {"systemd-journald"})).ret, true);
  EXPECT_TRUE(call_fn(make_call("service.enabled", {"systemd-journald"})).ret.is_boolean());

  outcome glob = call_fn(make_call("service.status", {"systemd-journal?"}));
  ASSERT_TRUE(glob.ret.is_object()) << glob.ret.dump();
  EXPECT_EQ(glob.ret.value("systemd-journald", false), true);
}

TEST_F(service_mod_systemd_test, a_unit_that_does_not_exist) {
  EXPECT_EQ(call_fn(make_call("service.status", {k_missing_unit})).ret, false);
  EXPECT_EQ(call_fn(make_call("service.available", {k_missing_unit})).ret, false);
  EXPECT_EQ(call_fn(make_call("service.enabled", {k_missing_unit})).ret, false);
  outcome o = execute_call(make_call("service.start", {k_missing_unit}));
  EXPECT_FALSE(o.success);
  const std::string msg = o.ret.get<std::string>();
  EXPECT_TRUE(msg.starts_with("ERROR: service.start " + k_missing_unit + ": ")) << msg;
  EXPECT_NE(msg.find("not found"), std::string::npos) << msg;
}

}  // namespace
}  // namespace brine::modules
