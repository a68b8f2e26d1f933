#include "modules/process.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/experimental/awaitable_operators.hpp>

#include "base/error.h"
#include "modules/tests/test_util.h"

namespace brine::modules {
namespace {

using namespace testing;

process_options shell(std::string command) {
  process_options o;
  o.shell_command = std::move(command);
  o.timeout = 20s;
  return o;
}

class process_test : public ::testing::Test {
 protected:
  // Every test must leave no child behind, finished or not.
  void TearDown() override { EXPECT_TRUE(no_children_left()); }
};

TEST_F(process_test, runs_argv_and_captures_stdout) {
  process_options o;
  o.argv = {"echo", "hello", "world"};
  process_result r = run_sync(run_process(o));
  EXPECT_EQ(r.stdout_text, "hello world\n");
  EXPECT_EQ(r.stderr_text, "");
  EXPECT_EQ(r.retcode, 0);
  EXPECT_GT(r.pid, 0);
  EXPECT_FALSE(r.timed_out);
}

TEST_F(process_test, separates_stdout_and_stderr) {
  process_result r = run_sync(run_process(shell("echo out; echo err >&2; exit 3")));
  EXPECT_EQ(r.stdout_text, "out\n");
  EXPECT_EQ(r.stderr_text, "err\n");
  EXPECT_EQ(r.retcode, 3);
}

TEST_F(process_test, merge_stderr_interleaves_in_order) {
  process_options o = shell("echo one; echo two >&2; echo three");
  o.merge_stderr = true;
  process_result r = run_sync(run_process(o));
  EXPECT_EQ(r.stdout_text, "one\ntwo\nthree\n");
  EXPECT_EQ(r.stderr_text, "");
}

TEST_F(process_test, umask_is_the_childs) {
  process_options o = shell("umask; sh -c umask");
  o.umask = 027;
  process_result r = run_sync(run_process(o));
  EXPECT_EQ(r.stdout_text, "0027\n0027\n");
  // The minion's own umask is untouched.
  mode_t mine = ::umask(022);
  ::umask(mine);
  EXPECT_NE(mine, static_cast<mode_t>(027));
}

TEST_F(process_test, runas_unknown_user_is_refused_before_fork) {
  process_options o = shell("true");
  o.runas = "no-such-user-brine";
  EXPECT_THROW(run_sync(run_process(o)), base::error);
}

TEST_F(process_test, runas_own_user_sets_its_environment) {
  struct passwd* pw = ::getpwuid(::geteuid());
  ASSERT_NE(pw, nullptr);
  process_options o = shell("echo \"$USER $LOGNAME $HOME\"; pwd");
  o.runas = pw->pw_name;
  process_result r = run_sync(run_process(o));
  struct stat st {};
  bool home_ok = ::stat(pw->pw_dir, &st) == 0 && S_ISDIR(st.st_mode);
  std::string want = std::string(pw->pw_name) + " " + pw->pw_name + " " + pw->pw_dir + "\n";
  EXPECT_TRUE(r.stdout_text.starts_with(want)) << r.stdout_text;
  if (home_ok) {
    EXPECT_EQ(r.stdout_text, want + pw->pw_dir + "\n");
  }
}

TEST_F(process_test, signal_gives_128_plus_signal) {
  process_result r = run_sync(run_process(shell("kill -TERM $$")));
  EXPECT_EQ(r.retcode, 128 + SIGTERM);
}

TEST_F(process_test, stdin_text_is_written_and_closed) {
  process_options o;
  o.argv = {"cat"};
  o.stdin_text = "line one\nline two";
  EXPECT_EQ(run_sync(run_process(o)).stdout_text, "line one\nline two");
}

TEST_F(process_test, large_stdin_and_stdout_flow_concurrently) {
  // 4 MiB each way: deadlocks unless stdin is written while stdout is read.
  process_options o;
  o.argv = {"cat"};
  o.stdin_text = std::string(4 * 1024 * 1024, 'x');
  process_result r = run_sync(run_process(o));
  EXPECT_EQ(r.stdout_text.size(), 4u * 1024 * 1024);
  EXPECT_EQ(r.retcode, 0);
}

TEST_F(process_test, stdin_the_child_ignores_does_not_raise_sigpipe) {
  process_options o = shell("exit 0");
  o.stdin_text = std::string(8 * 1024 * 1024, 'x');
  EXPECT_EQ(run_sync(run_process(o)).retcode, 0);  // we are still alive to check
}

TEST_F(process_test, stdin_defaults_to_dev_null) {
  process_options o;
  o.argv = {"cat"};
  process_result r = run_sync(run_process(o), 10s);
  EXPECT_EQ(r.stdout_text, "");
  EXPECT_EQ(r.retcode, 0);
}

TEST_F(process_test, env_is_merged_over_the_current_environment) {
  ::setenv("BRINE_TEST_INHERITED", "kept", 1);
  ::setenv("BRINE_TEST_OVERRIDDEN", "old", 1);
  process_options o = shell("echo $BRINE_TEST_INHERITED $BRINE_TEST_OVERRIDDEN $BRINE_TEST_NEW");
  o.env = {{"BRINE_TEST_OVERRIDDEN", "new"}, {"BRINE_TEST_NEW", "added"}};
  EXPECT_EQ(run_sync(run_process(o)).stdout_text, "kept new added\n");
}

TEST_F(process_test, env_path_is_used_to_find_argv0) {
  temp_dir dir;
  std::string script = dir.file("brine-hello");
  {
    std::ofstream f(script);
    f << "#!/bin/sh\necho found me\n";
  }
  ::chmod(script.c_str(), 0755);
  process_options o;
  o.argv = {"brine-hello"};
  o.env = {{"PATH", dir.path() + ":/usr/bin:/bin"}};
  EXPECT_EQ(run_sync(run_process(o)).stdout_text, "found me\n");
}

TEST_F(process_test, cwd_is_applied) {
  temp_dir dir;
  process_options o;
  o.argv = {"pwd", "-P"};
  o.cwd = dir.path();
  EXPECT_EQ(run_sync(run_process(o)).stdout_text,
            std::filesystem::canonical(dir.path()).string() + "\n");
}

TEST_F(process_test, bad_cwd_is_a_clear_error) {
  process_options o;
  o.argv = {"true"};
  o.cwd = "/nonexistent/brine";
  try {
    run_sync(run_process(o));
    FAIL() << "expected base::error";
  } catch (const base::error& e) {
    EXPECT_STREQ(e.what(), "cwd /nonexistent/brine: No such file or directory");
  }
}

TEST_F(process_test, missing_program_is_a_clear_error) {
  process_options o;
  o.argv = {"brine-no-such-program"};
  try {
    run_sync(run_process(o));
    FAIL() << "expected base::error";
  } catch (const base::error& e) {
    EXPECT_STREQ(e.what(), "exec 'brine-no-such-program': not found in PATH");
  }
  o.argv = {"/nonexistent/prog"};
  try {
    run_sync(run_process(o));
    FAIL() << "expected base::error";
  } catch (const base::error& e) {
    EXPECT_STREQ(e.what(), "exec '/nonexistent/prog': No such file or directory");
  }
}

TEST_F(process_test, missing_program_in_a_shell_is_exit_127) {
  process_result r = run_sync(run_process(shell("brine-no-such-program")));
  EXPECT_EQ(r.retcode, 127);
  EXPECT_NE(r.stderr_text.find("not found"), std::string::npos) << r.stderr_text;
}

TEST_F(process_test, child_leads_its_own_session_and_group) {
  // /proc/PID/stat: pid (comm) state ppid pgrp session
  process_result r =
      run_sync(run_process(shell("read -r pid comm st ppid pgrp sid rest "
                                 "< /proc/$$/stat; echo $pid $pgrp $sid")));
  std::string p = std::to_string(r.pid);
  EXPECT_EQ(r.stdout_text, p + " " + p + " " + p + "\n");
}

TEST_F(process_test, inherits_no_descriptors_beyond_stdio) {
  // Opened without O_CLOEXEC on purpose: the child must still not see it.
  int leaky = ::open("/dev/null", O_RDONLY);
  ASSERT_GE(leaky, 3);
  std::string check =
      "test -e /proc/self/fd/" + std::to_string(leaky) + " && echo leaked || echo clean";
  process_result r = run_sync(run_process(shell(check)));
  ::close(leaky);
  EXPECT_EQ(r.stdout_text, "clean\n");
}

TEST_F(process_test, waits_for_eof_from_background_writers) {
  // The leader exits first; a background child still writes to the pipe.
  process_result r = run_sync(run_process(shell("(sleep 0.3; echo late) & echo early")));
  EXPECT_EQ(r.stdout_text, "early\nlate\n");
}

TEST_F(process_test, output_beyond_the_cap_is_dropped_and_noted) {
  process_options o = shell("head -c 100000 /dev/zero; echo done >&2");
  o.max_output = 1000;
  process_result r = run_sync(run_process(o));
  EXPECT_EQ(r.stdout_text.size(), 1000u);
  EXPECT_TRUE(r.stdout_truncated);
  EXPECT_EQ(r.stderr_text, "done\n");
  EXPECT_FALSE(r.stderr_truncated);
  EXPECT_EQ(r.retcode, 0);
}

TEST_F(process_test, timeout_kills_the_whole_process_group) {
  temp_dir dir;
  std::string pid_file = dir.file("grandchild.pid");
  process_options o = shell("echo before; sleep 100 & echo $! > " + pid_file + "; sleep 100");
  o.timeout = 1s;
  process_result r = run_sync(run_process(o));
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.retcode, 128 + SIGKILL);
  EXPECT_EQ(r.stdout_text, "before\n");  // output until the kill is kept
  pid_t grandchild = read_pid(pid_file);
  ASSERT_GT(grandchild, 0);
  EXPECT_TRUE(wait_gone(grandchild));
}

asio::awaitable<std::size_t> race_against_timer(process_options o) {
  using namespace asio::experimental::awaitable_operators;
  auto winner = co_await (run_process(std::move(o)) || sleep_for(300ms));
  co_return winner.index();
}

TEST_F(process_test, losing_a_race_kills_and_reaps_the_group) {
  temp_dir dir;
  std::string pid_file = dir.file("grandchild.pid");
  std::size_t winner =
      run_sync(race_against_timer(shell("sleep 100 & echo $! > " + pid_file + "; sleep 100")));
  EXPECT_EQ(winner, 1u);  // the timer won: the child was cut, not waited for
  pid_t grandchild = read_pid(pid_file);
  ASSERT_GT(grandchild, 0);
  EXPECT_TRUE(wait_gone(grandchild));
  EXPECT_TRUE(no_children_left());  // the shell was reaped before the race completed
}

TEST_F(process_test, cancellation_slot_kills_the_child_and_rethrows) {
  temp_dir dir;
  std::string pid_file = dir.file("child.pid");
  asio::io_context ctx;
  asio::cancellation_signal cancel;
  std::exception_ptr error;
  bool done = false;
  asio::co_spawn(
      ctx, run_process(shell("echo $$ > " + pid_file + "; exec sleep 100")),
      asio::bind_cancellation_slot(cancel.slot(), [&](std::exception_ptr e, process_result) {
        done = true;
        error = e;
      }));
  asio::steady_timer later(ctx, 300ms);
  later.async_wait([&](asio::error_code) { cancel.emit(asio::cancellation_type::terminal); });
  ctx.run_for(10s);
  ASSERT_TRUE(done);
  ASSERT_TRUE(error);
  try {
    std::rethrow_exception(error);
  } catch (const asio::system_error& e) {
    EXPECT_EQ(e.code(), asio::error::operation_aborted);
  }
  pid_t child = read_pid(pid_file);
  ASSERT_GT(child, 0);
  EXPECT_TRUE(process_gone(child));  // ours, so already reaped: no zombie either
}

TEST_F(process_test, abandoned_frames_kill_their_child) {
  temp_dir dir;
  std::string pid_file = dir.file("child.pid");
  {
    asio::io_context ctx;
    asio::co_spawn(ctx, run_process(shell("echo $$ > " + pid_file + "; exec sleep 100")),
                   [](std::exception_ptr, process_result) {});
    ctx.run_for(300ms);
  }  // io_context destroyed with the coroutine suspended
  pid_t child = read_pid(pid_file);
  ASSERT_GT(child, 0);
  EXPECT_TRUE(process_gone(child));
}

TEST_F(process_test, children_run_concurrently) {
  // Each child marks that it started, then waits for the other's mark: both
  // exit 0 only if they ran at the same time (one after the other, the
  // first would give up and exit 1).
  temp_dir dir;
  asio::io_context ctx;
  std::vector<int> codes;
  for (auto [me, other] : {std::pair{"a", "b"}, std::pair{"b", "a"}}) {
    std::string wait = "touch " + dir.file(me) + "; i=0; until [ -e " + dir.file(other) +
                       " ]; do i=$((i+1)); [ $i -gt 1200 ] && exit 1; sleep 0.05; done";
    asio::co_spawn(ctx, run_process(shell(wait)), [&](std::exception_ptr e, process_result r) {
      EXPECT_FALSE(e);
      codes.push_back(r.retcode);
    });
  }
  ctx.run_for(120s);
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
}

TEST_F(process_test, rejects_bad_options) {
  process_options none;
  EXPECT_THROW(run_sync(run_process(none)), base::error);
  process_options zero = shell("true");
  zero.timeout = 0s;
  EXPECT_THROW(run_sync(run_process(zero)), base::error);
  process_options bad_env = shell("true");
  bad_env.env = {{"A=B", "x"}};
  EXPECT_THROW(run_sync(run_process(bad_env)), base::error);
}

}  // namespace
}  // namespace brine::modules
