#include <thread>

#include <gtest/gtest.h>
#include <asio/experimental/awaitable_operators.hpp>

#include "base/error.h"
#include "modules/registry.h"
#include "modules/tests/test_util.h"

namespace brine::modules {
namespace {

using namespace testing;

class cmd_mod_test : public module_test {
 protected:
  cmd_mod_test() : module_test(register_builtin_modules) {}

  outcome run(std::string command, nlohmann::json kwargs = nlohmann::json::object()) {
    return call_fn(make_call("cmd.run", {std::move(command)}, std::move(kwargs)));
  }
};

TEST_F(cmd_mod_test, run_returns_stripped_stdout) {
  outcome o = run("echo hello");
  EXPECT_EQ(o.ret, "hello");
  EXPECT_TRUE(o.success);
  EXPECT_EQ(o.retcode, 0);
  EXPECT_EQ(run("printf 'a\\n\\n  \\n'").ret, "a");
  EXPECT_EQ(run("printf '  leading kept'").ret, "  leading kept");
}

TEST_F(cmd_mod_test, run_merges_stderr_like_salt) {
  EXPECT_EQ(run("echo out; echo err >&2").ret, "out\nerr");
  EXPECT_EQ(run("echo out; echo err >&2", {{"redirect_stderr", false}}).ret, "out");
}

TEST_F(cmd_mod_test, positional_words_are_joined) {
  EXPECT_EQ(call_fn(make_call("cmd.run", {"echo", "a", 2, "b"})).ret, "a 2 b");
  EXPECT_EQ(call_fn(make_call("cmd.run", nlohmann::json::array(), {{"cmd", "echo x=y"}})).ret,
            "x=y");
}

TEST_F(cmd_mod_test, run_propagates_the_exit_code) {
  outcome o = run("echo partial; exit 3");
  EXPECT_EQ(o.ret, "partial");
  EXPECT_FALSE(o.success);
  EXPECT_EQ(o.retcode, 3);
}

TEST_F(cmd_mod_test, cwd) {
  temp_dir dir;
  EXPECT_EQ(run("pwd -P", {{"cwd", dir.path()}}).ret,
            std::filesystem::canonical(dir.path()).string());
}

TEST_F(cmd_mod_test, missing_cwd_is_an_error_outcome) {
  outcome o = execute_call(make_call("cmd.run", {"true"}, {{"cwd", "/nonexistent/brine"}}));
  EXPECT_EQ(o.ret, "ERROR: cwd /nonexistent/brine: No such file or directory");
  EXPECT_FALSE(o.success);
  EXPECT_EQ(o.retcode, 1);
}

TEST_F(cmd_mod_test, env_as_mapping_or_list) {
  EXPECT_EQ(run("echo $FOO-$PORT", {{"env", {{"FOO", "bar"}, {"PORT", 80}}}}).ret, "bar-80");
  nlohmann::json list = nlohmann::json::array({{{"A", "1"}}, {{"B", true}}});
  EXPECT_EQ(run("echo $A $B", {{"env", list}}).ret, "1 true");
  // Merged over the minion's environment, not replacing it.
  ::setenv("BRINE_TEST_CMD_INHERITED", "yes", 1);
  EXPECT_EQ(run("echo $BRINE_TEST_CMD_INHERITED", {{"env", {{"X", "1"}}}}).ret, "yes");
}

TEST_F(cmd_mod_test, stdin) {
  EXPECT_EQ(run("cat", {{"stdin", "one\ntwo"}}).ret, "one\ntwo");
  // Salt expands a literal \n unless stdin_raw_newlines is set.
  EXPECT_EQ(run("cat", {{"stdin", "a\\nb"}}).ret, "a\nb");
  EXPECT_EQ(run("cat", {{"stdin", "a\\nb"}, {"stdin_raw_newlines", true}}).ret, "a\\nb");
}

TEST_F(cmd_mod_test, run_all_shape) {
  outcome o = call_fn(make_call("cmd.run_all", {"echo out; echo err >&2; exit 2"}));
  ASSERT_TRUE(o.ret.is_object());
  EXPECT_EQ(o.ret.size(), 4u);
  ASSERT_TRUE(o.ret["pid"].is_number_integer());
  EXPECT_GT(o.ret["pid"].get<int>(), 0);
  EXPECT_EQ(o.ret["retcode"], 2);
  EXPECT_EQ(o.ret["stdout"], "out");
  EXPECT_EQ(o.ret["stderr"], "err");
  EXPECT_FALSE(o.success);
  EXPECT_EQ(o.retcode, 2);

  outcome ok = call_fn(make_call("cmd.run_all", {"true"}));
  EXPECT_TRUE(ok.success);
  EXPECT_EQ(ok.retcode, 0);
  EXPECT_EQ(ok.ret["retcode"], 0);
}

TEST_F(cmd_mod_test, retcode_returns_the_code_and_succeeds) {
  outcome o = call_fn(make_call("cmd.retcode", {"echo noise; exit 7"}));
  EXPECT_EQ(o.ret, 7);
  EXPECT_TRUE(o.success);
  EXPECT_EQ(o.retcode, 0);
}

TEST_F(cmd_mod_test, timeout_kills_the_group_and_fails) {
  temp_dir dir;
  std::string pid_file = dir.file("grandchild.pid");
  std::string command = "sleep 100 & echo $! > " + pid_file + "; sleep 100";
  outcome o = run(command, {{"timeout", 1}});
  EXPECT_EQ(o.ret,
            "ERROR: command '" + command + "' timed out after 1 s; its process group was killed");
  EXPECT_FALSE(o.success);
  EXPECT_EQ(o.retcode, 1);
  pid_t grandchild = read_pid(pid_file);
  ASSERT_GT(grandchild, 0);
  EXPECT_TRUE(wait_gone(grandchild));
}

TEST_F(cmd_mod_test, run_all_timeout_reports_in_stderr) {
  outcome o = call_fn(make_call("cmd.run_all", {"echo started; sleep 100"}, {{"timeout", 0.5}}));
  EXPECT_FALSE(o.success);
  EXPECT_EQ(o.retcode, 1);
  ASSERT_TRUE(o.ret.is_object());
  EXPECT_EQ(o.ret["retcode"], 1);
  EXPECT_EQ(o.ret["stdout"], "started");
  EXPECT_EQ(o.ret["stderr"],
            "ERROR: command 'echo started; sleep 100' timed out after 0.5 s; its process group "
            "was killed");
}

TEST_F(cmd_mod_test, job_timeout_bounds_the_command) {
  call c = make_call("cmd.retcode", {"sleep 100"}, {{"timeout", 100}});
  c.timeout = 1s;
  outcome o = call_fn(std::move(c));
  EXPECT_EQ(o.ret, "ERROR: command 'sleep 100' timed out after 1 s; its process group was killed");
  EXPECT_FALSE(o.success);
}

asio::awaitable<std::size_t> race(const function* fn, call c) {
  using namespace asio::experimental::awaitable_operators;
  auto winner = co_await ((*fn)(std::move(c)) || sleep_for(300ms));
  co_return winner.index();
}

TEST_F(cmd_mod_test, cancellation_kills_the_command) {
  temp_dir dir;
  std::string pid_file = dir.file("grandchild.pid");
  std::size_t winner =
      run_sync(race(reg_.find("cmd.run"),
                    make_call("cmd.run", {"sleep 100 & echo $! > " + pid_file + "; sleep 100"})));
  EXPECT_EQ(winner, 1u);  // the timer won: the command was cut, not waited for
  pid_t grandchild = read_pid(pid_file);
  ASSERT_GT(grandchild, 0);
  EXPECT_TRUE(wait_gone(grandchild));
}

TEST_F(cmd_mod_test, bad_kwargs_name_the_kwarg) {
  EXPECT_EQ(error_of(make_call("cmd.run", {"true"}, {{"env", 5}})),
            "cmd.run: env must be a mapping of NAME: value (or a list of one-key mappings), got 5");
  EXPECT_EQ(error_of(make_call("cmd.run", {"true"}, {{"env", {{"A", {1, 2}}}}})),
            "cmd.run: env value of A must be a string or a scalar, got [1,2]");
  EXPECT_EQ(error_of(make_call("cmd.run", {"true"}, {{"timeout", -1}})),
            "cmd.run: timeout must be a positive number of seconds, got -1");
  EXPECT_EQ(error_of(make_call("cmd.run_all", {"true"}, {{"timeout", "soon"}})),
            "cmd.run_all: timeout must be a positive number of seconds, got \"soon\"");
  EXPECT_EQ(error_of(make_call("cmd.run", {"true"}, {{"cwd", 5}})),
            "cmd.run: cwd must be a directory path (a string), got 5");
  EXPECT_EQ(error_of(make_call("cmd.run", {"true"}, {{"stdin", {1}}})),
            "cmd.run: stdin must be a string, got [1]");
  EXPECT_NE(error_of(make_call("cmd.retcode", {"true"}, {{"root", "/srv/chroot"}}))
                .find("cmd.retcode: unknown keyword argument 'root'"),
            std::string::npos);
  EXPECT_EQ(error_of(make_call("cmd.run", {"true"}, {{"runas", "no-such-user-brine"}})),
            "User 'no-such-user-brine' is not available");
  EXPECT_EQ(error_of(make_call("cmd.run", {"true"}, {{"umask", "0"}})),
            "Zero umask is not allowed.");
  EXPECT_EQ(error_of(make_call("cmd.run", {"true"}, {{"umask", "09"}})), "Invalid umask: '09'");
  EXPECT_EQ(error_of(make_call("cmd.run", nlohmann::json::array())),
            "cmd.run needs a command to run");

  outcome o = execute_call(make_call("cmd.run", {"true"}, {{"env", "A=1"}}));
  EXPECT_FALSE(o.success);
  EXPECT_EQ(o.retcode, 1);
  EXPECT_EQ(o.ret.get<std::string>().rfind("ERROR: cmd.run: env must be", 0), 0u) << o.ret;
}

TEST_F(cmd_mod_test, salt_bookkeeping_kwargs_are_ignored) {
  EXPECT_EQ(run("echo ok", {{"__pub_jid", "1"}, {"python_shell", true}}).ret, "ok");
}

TEST_F(cmd_mod_test, commands_on_a_thread_pool) {
  // Two threads drive the same io_context: the readers of one child may run
  // on different threads (the sanitizers watch for races).
  asio::io_context ctx;
  const function* fn = reg_.find("cmd.run_all");
  int finished = 0;
  std::mutex m;
  for (int i = 0; i < 8; ++i) {
    asio::co_spawn(ctx, (*fn)(make_call("cmd.run_all", {"seq 1 20000; seq 1 100 >&2"})),
                   [&](std::exception_ptr e, outcome o) {
                     std::lock_guard lock(m);
                     EXPECT_FALSE(e);
                     EXPECT_TRUE(o.success);
                     EXPECT_EQ(o.ret["stdout"].get<std::string>().size(), 108893u);
                     EXPECT_EQ(o.ret["stderr"].get<std::string>().size(), 291u);
                     ++finished;
                   });
  }
  std::thread other([&] { ctx.run_for(30s); });
  ctx.run_for(30s);
  other.join();
  EXPECT_EQ(finished, 8);
}

}  // namespace
}  // namespace brine::modules
