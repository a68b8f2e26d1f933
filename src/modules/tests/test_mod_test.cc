#include <regex>

#include <gtest/gtest.h>
#include <asio/co_spawn.hpp>

#include "base/error.h"
#include "modules/registry.h"
#include "modules/tests/test_util.h"

namespace brine::modules {
namespace {

using namespace testing;

class test_mod_test : public module_test {
 protected:
  test_mod_test() : module_test(register_builtin_modules) {}
};

TEST_F(test_mod_test, ping_is_true) {
  outcome o = call_fn("test.ping");
  EXPECT_EQ(o.ret, true);
  EXPECT_TRUE(o.success);
  EXPECT_EQ(o.retcode, 0);
}

TEST_F(test_mod_test, echo_returns_the_text) {
  EXPECT_EQ(call_fn("test.echo", {"hello world"}).ret, "hello world");
  EXPECT_EQ(call_fn("test.echo", nlohmann::json::array(), {{"text", "by name"}}).ret, "by name");
  EXPECT_EQ(call_fn("test.echo", {5}).ret, "5");
}

TEST_F(test_mod_test, echo_without_text_says_what_it_needs) {
  try {
    call_fn("test.echo");
    FAIL() << "expected base::error";
  } catch (const base::error& e) {
    EXPECT_STREQ(e.what(), "test.echo needs one argument: the text to echo");
  }
  EXPECT_THROW(call_fn("test.echo", {"a", "b"}), base::error);
}

TEST_F(test_mod_test, sleeps_run_concurrently_on_one_thread) {
  asio::io_context ctx;
  const function* sleep = reg_.find("test.sleep");
  ASSERT_NE(sleep, nullptr);
  // Two hour-long sleeps on the context's one thread, then a short timer:
  // the timer fires while both still sleep only if sleeping does not hold
  // the thread.
  int finished = 0;
  for (int i = 0; i < 2; ++i) {
    call c;
    c.fun = "test.sleep";
    c.args = {3600};
    asio::co_spawn(ctx, (*sleep)(std::move(c)),
                   [&](std::exception_ptr, outcome) { ++finished; });
  }
  bool fired = false;
  asio::steady_timer soon(ctx, 10ms);
  soon.async_wait([&](asio::error_code) {
    fired = true;
    ctx.stop();
  });
  ctx.run_for(60s);
  EXPECT_TRUE(fired);
  EXPECT_EQ(finished, 0);
  // And short ones finish, each having slept.
  for (int i = 0; i < 2; ++i) {
    call c;
    c.fun = "test.sleep";
    c.args = {0.05};
    asio::co_spawn(ctx, (*sleep)(std::move(c)), [&](std::exception_ptr e, outcome o) {
      EXPECT_FALSE(e);
      EXPECT_EQ(o.ret, true);
      ++finished;
    });
  }
  ctx.restart();
  asio::steady_timer bound(ctx, 60s);
  bound.async_wait([&](asio::error_code) { ctx.stop(); });
  while (finished < 2 && !ctx.stopped()) ctx.run_one();
  EXPECT_EQ(finished, 2);
}

TEST_F(test_mod_test, sleep_takes_float_string_and_length) {
  EXPECT_EQ(call_fn("test.sleep", {0.2}).ret, true);
  EXPECT_EQ(call_fn("test.sleep", {"0.2"}).ret, true);
  EXPECT_EQ(call_fn("test.sleep", nlohmann::json::array(), {{"length", 0.2}}).ret, true);
}

TEST_F(test_mod_test, sleep_rejects_what_is_not_a_duration) {
  EXPECT_THROW(call_fn("test.sleep"), base::error);
  EXPECT_THROW(call_fn("test.sleep", {"soon"}), base::error);
  EXPECT_THROW(call_fn("test.sleep", {-1}), base::error);
  EXPECT_THROW(call_fn("test.sleep", {1e300}), base::error);
}

TEST_F(test_mod_test, version_is_the_project_version) {
  outcome o = call_fn("test.version");
  ASSERT_TRUE(o.ret.is_string());
  EXPECT_EQ(o.ret, BRINE_VERSION);
  EXPECT_TRUE(std::regex_match(o.ret.get<std::string>(), std::regex(R"(\d+\.\d+\.\d+)")));
}

TEST_F(test_mod_test, arg_returns_what_it_got) {
  outcome o = call_fn("test.arg", {1, "two"}, {{"three", 3}});
  EXPECT_EQ(o.ret, nlohmann::json({{"args", {1, "two"}}, {"kwargs", {{"three", 3}}}}));
}

TEST_F(test_mod_test, true_and_false) {
  EXPECT_EQ(call_fn("test.true").ret, true);
  outcome f = call_fn("test.false");
  EXPECT_EQ(f.ret, false);
  EXPECT_TRUE(f.success);
}

}  // namespace
}  // namespace brine::modules
