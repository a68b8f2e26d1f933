// The service states against a real init.d script on Debian without systemd
// (tests/support/initd_service.h installs it as brine-test-svc-state and
// removes it and its boot links afterwards, also when a test fails). Salt
// 3006 runs service.running and service.dead in "offline mode" (nothing to
// do) wherever systemctl is installed but systemd does not run, as on this
// build machine: the oracle tree service_states records that; here the
// execution function service.offline is replaced by one the test sets, so
// that both Salt's offline answers and its full running/dead logic are
// tested on one host.

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "states/tests/state_fixture.h"
#include "support/initd_service.h"

namespace brine::states {
namespace {

using plain_json = nlohmann::json;

bool g_offline = false;

asio::awaitable<modules::outcome> fake_offline(modules::call) {
  co_return modules::outcome{g_offline};
}

class service_states_test : public state_fixture {
 protected:
  service_states_test() {
    for (const auto& name : functions_.names()) {
      if (name == "service.offline") continue;
      with_fake_offline_.add(name, *functions_.find(name), functions_.doc(name),
                             functions_.instant(name) ? modules::registry::kind::instant
                                                      : modules::registry::kind::may_block);
    }
    with_fake_offline_.add("service.offline", fake_offline, "service.offline: set by the test");
    table_ = &with_fake_offline_;
    timeout_ = std::chrono::seconds(120);
  }

  void SetUp() override {
    g_offline = false;
    const std::string why = test::initd_service::skip_reason();
    if (!why.empty()) GTEST_SKIP() << why;
    svc_ = std::make_unique<test::initd_service>(
        "brine-test-svc-state", std::string(BRINE_SOURCE_DIR) + "/tests/support/brine-test-svc");
  }
  void TearDown() override { svc_.reset(); }

  // The service under test unless the test names another.
  json call(const std::string& fun, json low, bool test = false) {
    if (!low.contains("name")) low["name"] = svc_->name();
    return state_fixture::call(fun, std::move(low), test);
  }

  // The state's answer as Salt prints it: name, changes, result, comment.
  static json expect(const std::string& name, json changes, json result,
                     const std::string& comment) {
    json r = json::object();
    r["name"] = name;
    r["changes"] = std::move(changes);
    r["result"] = std::move(result);
    r["comment"] = comment;
    return r;
  }

  json changed(bool value) const {
    json c = json::object();
    c[svc_->name()] = value;
    return c;
  }

  bool start() const { return std::system(("service " + svc_->name() + " start").c_str()) == 0; }

  modules::registry with_fake_offline_;
  std::unique_ptr<test::initd_service> svc_;
};

TEST_F(service_states_test, running_starts_the_service_once) {
  const std::string n = svc_->name();
  EXPECT_EQ(call("service.running", {}, true),
            expect(n, json::object(), nullptr, "Service " + n + " is set to start"));
  EXPECT_FALSE(svc_->running());

  EXPECT_EQ(call("service.running", {}), expect(n, changed(true), true, "Started service " + n));
  EXPECT_TRUE(svc_->running());
  const pid_t pid = svc_->pid();

  EXPECT_EQ(call("service.running", {}),
            expect(n, json::object(), true, "The service " + n + " is already running"));
  EXPECT_EQ(call("service.running", {}, true),
            expect(n, json::object(), true, "The service " + n + " is already running"));
  EXPECT_EQ(svc_->pid(), pid);
  EXPECT_EQ(svc_->log(), "start\n");
}

TEST_F(service_states_test, running_with_sig_and_init_delay) {
  const std::string n = svc_->name();
  json low = {{"sig", n + " infinity"}, {"init_delay", 0.2}};
  const auto before = std::chrono::steady_clock::now();
  EXPECT_EQ(
      call("service.running", low),
      expect(n, changed(true), true, "Started service " + n + "\nDelayed return for 0.2 seconds"));
  EXPECT_GE(std::chrono::steady_clock::now() - before, std::chrono::milliseconds(200));
  EXPECT_EQ(call("service.running", {{"sig", n + " infinity"}}),
            expect(n, json::object(), true, "The service " + n + " is already running"));
}

TEST_F(service_states_test, running_with_enable) {
  const std::string n = svc_->name();
  const bool insserv = std::system("command -v insserv >/dev/null 2>&1") == 0;
  json r = call("service.running", {{"enable", true}});
  if (insserv) {
    EXPECT_EQ(r,
              expect(n, changed(true), true, "Service " + n + " has been enabled, and is running"));
  } else {
    // Salt's enable needs insserv; the service started all the same.
    EXPECT_EQ(r, expect(n, changed(true), false,
                        "Failed when setting service " + n +
                            " to start at boot, but the service is running"));
  }
  EXPECT_TRUE(svc_->running());

  ASSERT_TRUE(svc_->add_links());
  EXPECT_EQ(call("service.running", {{"enable", true}}),
            expect(n, json::object(), true, "The service " + n + " is already running"));
  EXPECT_EQ(call("service.running", {{"enable", false}}, true),
            expect(n, json::object(), nullptr, "Service " + n + " set to be disabled"));
  EXPECT_TRUE(svc_->has_start_link());
  // A string counts as Salt's is_true: "false" disables.
  EXPECT_EQ(call("service.running", {{"enable", "false"}}),
            expect(n, changed(true), true,
                   "Service " + n + " has been disabled, and is in the desired state"));
  EXPECT_FALSE(svc_->has_start_link());
  EXPECT_EQ(call("service.running", {{"enable", false}}),
            expect(n, json::object(), true, "The service " + n + " is already running"));
}

TEST_F(service_states_test, dead_stops_the_service_once) {
  const std::string n = svc_->name();
  ASSERT_TRUE(start());
  const pid_t pid = svc_->pid();
  EXPECT_EQ(call("service.dead", {}, true),
            expect(n, json::object(), nullptr, "Service " + n + " is set to be killed"));
  EXPECT_TRUE(svc_->running());
  // Salt's changes hold the status after the stop: False.
  EXPECT_EQ(call("service.dead", {}),
            expect(n, changed(false), true, "Service " + n + " was killed"));
  EXPECT_FALSE(svc_->running());
  EXPECT_NE(::kill(pid, 0), 0);
  EXPECT_EQ(call("service.dead", {}),
            expect(n, json::object(), true, "The service " + n + " is already dead"));

  ASSERT_TRUE(svc_->add_links());
  EXPECT_EQ(call("service.dead", {{"enable", false}}),
            expect(n, changed(true), true,
                   "Service " + n + " has been disabled, and is in the desired state"));
  EXPECT_EQ(call("service.dead", {{"enable", false}}),
            expect(n, json::object(), true, "The service " + n + " is already dead"));
}

TEST_F(service_states_test, enabled_and_disabled) {
  const std::string n = svc_->name();
  ASSERT_TRUE(svc_->add_links());
  EXPECT_EQ(call("service.enabled", {}),
            expect(n, json::object(), true,
                   "Service " + n + " is already enabled, and is in the desired state"));
  EXPECT_EQ(call("service.disabled", {}, true),
            expect(n, json::object(), nullptr, "Service " + n + " set to be disabled"));
  EXPECT_EQ(call("service.disabled", {}),
            expect(n, changed(true), true,
                   "Service " + n + " has been disabled, and is in the desired state"));
  EXPECT_EQ(call("service.disabled", {}),
            expect(n, json::object(), true,
                   "Service " + n + " is already disabled, and is in the desired state"));
  EXPECT_EQ(call("service.enabled", {}, true),
            expect(n, json::object(), nullptr, "Service " + n + " set to be enabled"));
  if (std::system("command -v insserv >/dev/null 2>&1") != 0) {
    EXPECT_EQ(call("service.enabled", {}),
              expect(n, json::object(), false,
                     "Failed when setting service " + n +
                         " to start at boot, but the service was already running"));
  }
}

TEST_F(service_states_test, a_service_that_is_not_there) {
  const std::string n = "brine-test-svc-none-" + std::to_string(::getpid());
  const std::string gone = "The named service " + n + " is not available";
  EXPECT_EQ(call("service.running", {{"name", n}}), expect(n, json::object(), false, gone));
  EXPECT_EQ(call("service.running", {{"name", n}}, true),
            expect(n, json::object(), nullptr,
                   "Service " + n +
                       " not present; if created in this state run, it would have been started"));
  EXPECT_EQ(call("service.dead", {{"name", n}}), expect(n, json::object(), true, gone));
  EXPECT_EQ(call("service.dead", {{"name", n}}, true),
            expect(n, json::object(), nullptr,
                   "Service " + n +
                       " not present; if created in this state run, it would have been stopped"));
  EXPECT_EQ(call("service.enabled", {{"name", n}}), expect(n, json::object(), false, gone));
  EXPECT_EQ(call("service.enabled", {{"name", n}}, true),
            expect(n, json::object(), nullptr,
                   "Service " + n +
                       " not present; if created in this state run, it would have been enabled"));
  EXPECT_EQ(call("service.disabled", {{"name", n}}), expect(n, json::object(), true, gone));
}

TEST_F(service_states_test, the_enabled_typo_and_masking) {
  const std::string n = svc_->name();
  EXPECT_EQ(call("service.running", {{"enabled", true}}),
            expect(n, json::object(), false,
                   "Service " + n +
                       " uses non-existent option \"enabled\".  Perhaps \"enable\" option was "
                       "intended?"));
  EXPECT_FALSE(svc_->running());
  EXPECT_EQ(call("service.masked", {}),
            expect(n, json::object(), false, "Service masking not available on this minion"));
  json r = call("service.running", {{"unmask", true}});
  EXPECT_EQ(r["comment"],
            "Started service " + n + "\nService masking not available on this minion");
  EXPECT_EQ(r["result"], true);
}

TEST_F(service_states_test, offline_mode_does_nothing_but_mod_watch) {
  g_offline = true;
  const std::string n = svc_->name();
  const json nothing = expect(n, json::object(), true, "Running in OFFLINE mode. Nothing to do");
  EXPECT_EQ(call("service.running", {}), nothing);
  EXPECT_EQ(call("service.running", {{"name", "brine-test-svc-none"}})["comment"],
            "Running in OFFLINE mode. Nothing to do");
  EXPECT_FALSE(svc_->running());
  // Salt's systemd module, loaded beside the init.d one, fails offline.
  json r = call("service.masked", {});
  if (std::system("command -v systemctl >/dev/null 2>&1") == 0) {
    EXPECT_EQ(r,
              expect(n, json::object(), false,
                     "Cannot run in offline mode. Failed to get information on unit '" + n + "'"))
        << r.dump();
  } else {
    EXPECT_EQ(r["result"], false);
  }
  EXPECT_EQ(call("service.mod_watch", {{"sfun", "running"}}),
            expect(n, changed(true), true, "Service started"));
  EXPECT_TRUE(svc_->running());
  EXPECT_EQ(call("service.dead", {}), nothing);
  EXPECT_TRUE(svc_->running());
}

TEST_F(service_states_test, mod_watch_restarts_reloads_or_starts) {
  const std::string n = svc_->name();
  const json running = {{"sfun", "running"}};
  EXPECT_EQ(call("service.mod_watch", running, true),
            expect(n, json::object(), nullptr, "Service is set to be started"));
  // Not running: a stop, then a start.
  EXPECT_EQ(call("service.mod_watch", running), expect(n, changed(true), true, "Service started"));
  ASSERT_TRUE(svc_->running());
  const pid_t first = svc_->pid();
  EXPECT_EQ(svc_->log(), "stop\nstart\n");

  EXPECT_EQ(call("service.mod_watch", running, true),
            expect(n, json::object(), nullptr, "Service is set to be restarted"));
  EXPECT_EQ(svc_->pid(), first);
  EXPECT_EQ(call("service.mod_watch", running),
            expect(n, changed(true), true, "Service restarted"));
  const pid_t second = svc_->pid();
  EXPECT_NE(second, first);
  EXPECT_TRUE(svc_->running());

  EXPECT_EQ(call("service.mod_watch", {{"sfun", "running"}, {"reload", true}}),
            expect(n, changed(true), true, "Service reloaded"));
  EXPECT_EQ(call("service.mod_watch", {{"sfun", "running"}, {"reload", true}, {"force", true}}),
            expect(n, changed(true), true, "Service forcefully reloaded"));
  // full_restart needs a service.full_restart, which neither backend has.
  EXPECT_EQ(call("service.mod_watch", {{"sfun", "running"}, {"full_restart", true}}),
            expect(n, changed(true), true, "Service restarted"));
  const pid_t third = svc_->pid();
  EXPECT_NE(third, second);
  EXPECT_EQ(svc_->log(), "stop\nstart\nrestart\nreload\nforce-reload\nrestart\n");

  EXPECT_EQ(call("service.mod_watch", {{"sfun", "dead"}}, true),
            expect(n, json::object(), nullptr, "Service is set to be stopped"));
  EXPECT_EQ(call("service.mod_watch", {{"sfun", "dead"}}),
            expect(n, changed(true), true, "Service stopped"));
  EXPECT_FALSE(svc_->running());
  EXPECT_EQ(call("service.mod_watch", {{"sfun", "dead"}}),
            expect(n, json::object(), true, "Service is already stopped"));
  EXPECT_EQ(call("service.mod_watch", {{"sfun", "enabled"}}),
            expect(n, json::object(), false, "Unable to trigger watch for service.enabled"));
}

TEST_F(service_states_test, a_failing_start) {
  // A script whose start fails.
  const std::string n = svc_->name();
  ASSERT_EQ(std::system(("sed -i 's/; start ;;/; exit 1 ;;/' " +
                         svc_->path())
                            .c_str()),
            0);
  EXPECT_EQ(call("service.running", {}),
            expect(n, json::object(), false, "Service " + n + " failed to start"));
  EXPECT_EQ(call("service.mod_watch", {{"sfun", "running"}}),
            expect(n, changed(false), false, "Failed to start the service"));
}

}  // namespace
}  // namespace brine::states
