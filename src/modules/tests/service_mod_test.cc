// Tests of the service module. Where systemd runs, only read-only functions
// run, on units every systemd host has, and a start of a unit that does not
// exist. On Debian without systemd (containers, this build machine) the
// init.d backend drives a throwaway script (tests/support/initd_service.h):
// start, stop, restart, reload, status (also by sig and glob), boot links.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

#include "base/error.h"
#include "modules/registry.h"
#include "modules/service.h"
#include "modules/tests/test_util.h"
#include "support/initd_service.h"

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

const char* const k_unit_functions[] = {
    "service.start",    "service.stop",      "service.restart", "service.reload",
    "service.status",   "service.enable",    "service.disable", "service.enabled",
    "service.disabled", "service.available", "service.missing", "service.force_reload"};

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

TEST_F(service_mod_test, the_backend_is_salts_choice) {
  const service::backend b = service::detect();
  if (systemd_running()) {
    EXPECT_EQ(b, service::backend::systemd);
    EXPECT_EQ(call_fn(make_call("service.offline")).ret, false);
    return;
  }
  const bool debian = std::ifstream("/etc/os-release").good() &&
                      std::system("grep -qx 'ID=debian' /etc/os-release") == 0;
  if (debian) {
    EXPECT_EQ(b, service::backend::initd);
  }
  const bool systemctl = std::system("command -v systemctl >/dev/null 2>&1") == 0;
  EXPECT_EQ(call_fn(make_call("service.offline")).ret, systemctl);
  // Functions of the systemd module alone.
  outcome o = execute_call(make_call("service.masked", {"ssh"}));
  EXPECT_FALSE(o.success);
  if (systemctl) {
    EXPECT_EQ(o.ret, "ERROR: Cannot run in offline mode. Failed to get information on unit 'ssh'");
  } else if (b == service::backend::initd) {
    EXPECT_EQ(o.ret,
              "ERROR: 'service.masked' is not available where services are managed by "
              "Debian's init.d scripts");
  }
}

TEST_F(service_mod_test, bad_arguments_name_the_argument) {
  if (service::detect() == service::backend::none) {
    GTEST_SKIP() << "this host has neither systemd nor Debian's init.d: every function fails "
                    "before it reads its arguments";
  }
  // Checked before anything runs.
  for (const char* fun : k_unit_functions) {
    EXPECT_NE(error_of(make_call(fun)).find(std::string(fun) + ": needs the name of a service"),
              std::string::npos)
        << fun;
    EXPECT_NE(error_of(make_call(fun, {"--now"})).find(": name must be "), std::string::npos) << fun;
    EXPECT_NE(error_of(make_call(fun, {"ssh"}, {{"bogus", 1}}))
                  .find("unknown keyword argument "
                        "'bogus'"),
              std::string::npos)
        << fun;
  }
  if (service::detect() == service::backend::systemd) {
    EXPECT_NE(error_of(make_call("service.start", {"ssh"}, {{"no_block", "yes"}}))
                  .find("service.start: no_block must be true or false"),
              std::string::npos);
    EXPECT_NE(error_of(make_call("service.restart", {"ssh", true, "no"}))
                  .find("unmask must be true or false"),
              std::string::npos);
    EXPECT_NE(error_of(make_call("service.stop", {"ssh"}, {{"unmask", true}}))
                  .find("unknown keyword argument 'unmask' (accepted: name, no_block)"),
              std::string::npos);
  } else {
    // Salt's debian_service functions take the name alone.
    EXPECT_NE(error_of(make_call("service.start", {"ssh"}, {{"no_block", true}}))
                  .find("unknown keyword argument 'no_block' (accepted: name)"),
              std::string::npos);
    EXPECT_NE(error_of(make_call("service.start", {"../../bin/sh"}))
                  .find("name must be the name of a script in /etc/init.d"),
              std::string::npos);
    EXPECT_NE(error_of(make_call("service.status", {"ssh", "("}))
                  .find("service.status: sig is not a valid regular expression at offset 1"),
              std::string::npos);
  }
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
    if (!systemd_running()) {
      GTEST_SKIP() << "needs systemd running as this host's init (PID 1) to ask systemctl; this "
                      "host has none (a container): service_mod_initd_test covers it";
    }
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

// The init.d backend against a real script: tests/support/brine-test-svc
// installed as /etc/init.d/brine-test-svc-mod.
class service_mod_initd_test : public service_mod_test {
 protected:
  void SetUp() override {
    const std::string why = test::initd_service::skip_reason();
    if (!why.empty()) GTEST_SKIP() << why;
    svc_ = std::make_unique<test::initd_service>(
        "brine-test-svc-mod", std::string(BRINE_SOURCE_DIR) + "/tests/support/brine-test-svc");
  }
  void TearDown() override {
    svc_.reset();
    service_mod_test::TearDown();
  }
  // fun(args), or fun(this service) without args; must succeed.
  json ret1(const std::string& fun, json args = nullptr) {
    if (args.is_null()) args = json::array({svc_->name()});
    outcome o = call_fn(make_call(fun, std::move(args)));
    EXPECT_TRUE(o.success) << fun << ": " << o.ret.dump();
    return o.ret;
  }
  std::unique_ptr<test::initd_service> svc_;
};

bool contains(const json& list, const std::string& item) {
  return std::find(list.begin(), list.end(), json(item)) != list.end();
}

TEST_F(service_mod_initd_test, start_stop_restart_reload_and_status) {
  const std::string name = svc_->name();
  EXPECT_EQ(ret1("service.status"), false);
  EXPECT_EQ(ret1("service.start"), true);
  ASSERT_TRUE(svc_->running());
  const pid_t first = svc_->pid();
  EXPECT_EQ(ret1("service.status"), true);
  EXPECT_EQ(ret1("service.start"), true);  // already running: the script says so
  EXPECT_EQ(svc_->pid(), first);

  EXPECT_EQ(ret1("service.restart"), true);
  ASSERT_TRUE(svc_->running());
  const pid_t second = svc_->pid();
  EXPECT_NE(second, first);
  EXPECT_TRUE(wait_gone(first));

  EXPECT_EQ(ret1("service.reload"), true);
  EXPECT_EQ(ret1("service.force_reload"), true);
  EXPECT_EQ(svc_->pid(), second);  // the daemon ignores the HUP of reload
  EXPECT_TRUE(svc_->running());
  EXPECT_EQ(svc_->log(), "start\nstart\nrestart\nreload\nforce-reload\n");

  EXPECT_EQ(ret1("service.stop"), true);
  EXPECT_TRUE(wait_gone(second));
  EXPECT_EQ(ret1("service.status"), false);
  EXPECT_EQ(ret1("service.stop"), true);
}

TEST_F(service_mod_initd_test, a_failing_script_answers_false) {
  // `service NAME bogus-action` is not what these call, but a missing
  // script is: service exits non-zero.
  const std::string gone = "brine-test-svc-none-" + std::to_string(::getpid());
  EXPECT_EQ(ret1("service.start", {gone}), false);
  EXPECT_EQ(ret1("service.status", {gone}), false);
  EXPECT_EQ(ret1("service.available", {gone}), false);
  EXPECT_EQ(ret1("service.missing", {gone}), true);
}

TEST_F(service_mod_initd_test, status_by_signature_and_by_glob) {
  const std::string sig = svc_->name() + " infinity";  // the daemon's ps line
  EXPECT_EQ(ret1("service.status", {svc_->name(), sig}), false);
  ASSERT_EQ(ret1("service.start"), true);
  EXPECT_EQ(ret1("service.status", {svc_->name(), sig}), true);
  EXPECT_EQ(
      ret1("service.status", {svc_->name(), "^\\S+\\s+" + std::to_string(svc_->pid()) + "\\s"}),
      true);
  EXPECT_EQ(ret1("service.status", {svc_->name(), "no-such-brine-process-[0-9]{9}"}), false);

  json glob = ret1("service.status", {"brine-test-svc-mo?"});
  ASSERT_TRUE(glob.is_object()) << glob.dump();
  EXPECT_EQ(glob, json({{svc_->name(), true}}));
  ASSERT_EQ(ret1("service.stop"), true);
  EXPECT_EQ(ret1("service.status", {"brine-test-svc-m[o]d"}), json({{svc_->name(), false}}));
  EXPECT_EQ(ret1("service.status", {svc_->name(), sig}), false);
}

TEST_F(service_mod_initd_test, available_and_the_lists) {
  EXPECT_EQ(ret1("service.available"), true);
  EXPECT_EQ(ret1("service.missing"), false);
  json all = ret1("service.get_all", json::array());
  ASSERT_TRUE(all.is_array());
  EXPECT_TRUE(contains(all, svc_->name())) << all.dump();
  EXPECT_FALSE(contains(all, "README"));
  EXPECT_TRUE(std::is_sorted(all.begin(), all.end()));
  json disabled = ret1("service.get_disabled", json::array());
  EXPECT_TRUE(contains(disabled, svc_->name())) << disabled.dump();
  EXPECT_FALSE(contains(ret1("service.get_enabled", json::array()), svc_->name()));
}

TEST_F(service_mod_initd_test, boot_links) {
  EXPECT_EQ(ret1("service.enabled"), false);
  EXPECT_EQ(ret1("service.disabled"), true);
  ASSERT_TRUE(svc_->add_links());
  EXPECT_EQ(ret1("service.enabled"), true);
  EXPECT_EQ(ret1("service.disabled"), false);
  EXPECT_TRUE(contains(ret1("service.get_enabled", json::array()), svc_->name()));

  EXPECT_EQ(ret1("service.disable"), true);
  EXPECT_FALSE(svc_->has_start_link());
  EXPECT_EQ(ret1("service.enabled"), false);
  EXPECT_EQ(ret1("service.disabled"), true);
  EXPECT_TRUE(contains(ret1("service.get_disabled", json::array()), svc_->name()));

  // Salt's enable is `insserv NAME && update-rc.d NAME enable`: it needs
  // insserv, which Debian 12 installs only with sysvinit.
  const bool insserv = std::system("command -v insserv >/dev/null 2>&1") == 0;
  EXPECT_EQ(ret1("service.enable"), insserv);
  EXPECT_EQ(svc_->has_start_link(), insserv);
  EXPECT_EQ(ret1("service.enabled"), insserv);
}

}  // namespace
}  // namespace brine::modules
