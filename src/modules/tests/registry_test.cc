#include "modules/registry.h"

#include <gtest/gtest.h>
#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>

#include "base/error.h"
#include "modules/arguments.h"
#include "modules/tests/test_util.h"

namespace brine::modules {
namespace {

using namespace testing;

class registry_test : public module_test {
 protected:
  registry_test() : module_test(register_builtin_modules) {}

  outcome run(call c, std::chrono::steady_clock::duration limit = 30s) {
    return run_sync(execute(reg_, std::move(c)), limit);
  }
};

asio::awaitable<outcome> answer(call c) { co_return outcome{c.args, true, 0}; }

TEST(registry, finds_what_was_added) {
  registry reg;
  reg.add("my.answer", answer, "Returns its arguments.");
  ASSERT_NE(reg.find("my.answer"), nullptr);
  EXPECT_EQ(reg.find("my.other"), nullptr);
  EXPECT_EQ(reg.doc("my.answer"), "Returns its arguments.");
  EXPECT_EQ(reg.doc("my.other"), "");
  EXPECT_EQ(reg.names(), std::vector<std::string>{"my.answer"});
  outcome o = run_sync(execute(reg, make_call("my.answer", {1, "two"})));
  EXPECT_EQ(o.ret, nlohmann::json({1, "two"}));
  EXPECT_TRUE(o.success);
}

TEST(registry, registering_a_name_twice_is_a_bug) {
  registry reg;
  reg.add("my.answer", answer, "first");
  EXPECT_DEATH(reg.add("my.answer", answer, "second"), "registered twice");
}

TEST_F(registry_test, builtins_are_registered_with_docs) {
  for (const char* name :
       {"test.ping", "test.echo", "test.sleep", "test.version", "test.kwarg", "test.retcode",
        "test.versions_report", "cmd.run", "cmd.run_all", "cmd.retcode", "cmd.shell", "cmd.which",
        "cmd.has_exec", "cmd.script", "grains.items", "grains.get", "grains.item", "grains.ls",
        "grains.filter_by", "grains.setval", "grains.delval", "pillar.items", "pillar.get",
        "pillar.item", "pillar.ls", "config.get", "sys.list_functions", "sys.list_modules",
        "sys.doc", "saltutil.running", "saltutil.find_job", "saltutil.kill_job",
        "saltutil.refresh_grains", "saltutil.refresh_pillar", "saltutil.sync_all"}) {
    EXPECT_NE(reg_.find(name), nullptr) << name;
  }
  // sys.doc text: a first line that stands alone (the summary the function
  // reference lists), more lines optional.
  for (const auto& name : reg_.names()) {
    const std::string& doc = reg_.doc(name);
    std::string first = doc.substr(0, doc.find('\n'));
    EXPECT_GT(first.size(), 10u) << name << ": a summary line";
    EXPECT_NE(first.back(), ':') << name << ": the summary is a sentence of its own";
  }
}

TEST_F(registry_test, unknown_function_is_not_available) {
  outcome o = run(make_call("foo.bar"));
  EXPECT_EQ(o.ret, "'foo.bar' is not available.");
  EXPECT_FALSE(o.success);
  EXPECT_EQ(o.retcode, 254);
}

TEST_F(registry_test, exceptions_become_error_outcomes) {
  outcome o = run(make_call("test.exception", {"boom"}));
  EXPECT_EQ(o.ret, "ERROR: boom");
  EXPECT_FALSE(o.success);
  EXPECT_EQ(o.retcode, 1);
}

TEST_F(registry_test, bad_arguments_become_error_outcomes) {
  outcome o = run(make_call("test.echo"));
  EXPECT_EQ(o.ret, "ERROR: test.echo needs one argument: the text to echo");
  EXPECT_FALSE(o.success);
  EXPECT_EQ(o.retcode, 1);
}

TEST_F(registry_test, job_timeout_cancels_the_function) {
  call c = make_call("test.sleep", {30});
  c.timeout = 1s;
  outcome o = run(std::move(c));
  EXPECT_EQ(o.ret, "ERROR: job test.sleep timed out after 1 s and was killed");
  EXPECT_FALSE(o.success);
  EXPECT_EQ(o.retcode, 1);
}

TEST_F(registry_test, job_timeout_kills_the_command_group) {
  temp_dir dir;
  std::string pid_file = dir.file("grandchild.pid");
  call c = make_call("cmd.run", {"sleep 100 & echo $! > " + pid_file + "; sleep 100"});
  c.timeout = 1s;
  outcome o = run(std::move(c));
  EXPECT_FALSE(o.success);
  ASSERT_TRUE(o.ret.is_string());
  // Whichever limit fired first, the group is dead and the job failed.
  EXPECT_NE(o.ret.get<std::string>().find("timed out after 1 s"), std::string::npos) << o.ret;
  pid_t grandchild = read_pid(pid_file);
  ASSERT_GT(grandchild, 0);
  EXPECT_TRUE(wait_gone(grandchild));
}

TEST_F(registry_test, a_function_within_its_limit_is_not_disturbed) {
  call c = make_call("test.sleep", {0.2});
  c.timeout = 5s;
  outcome o = run(std::move(c));
  EXPECT_EQ(o.ret, true);
  EXPECT_TRUE(o.success);
}

TEST_F(registry_test, caller_cancellation_kills_the_job_and_says_so) {
  temp_dir dir;
  std::string pid_file = dir.file("child.pid");
  asio::io_context ctx;
  asio::cancellation_signal cancel;
  std::optional<outcome> result;
  asio::co_spawn(
      ctx, execute(reg_, make_call("cmd.run", {"echo $$ > " + pid_file + "; exec sleep 100"})),
      asio::bind_cancellation_slot(cancel.slot(), [&](std::exception_ptr e, outcome o) {
        EXPECT_FALSE(e);
        result = std::move(o);
      }));
  asio::steady_timer later(ctx, 300ms);
  later.async_wait([&](asio::error_code) { cancel.emit(asio::cancellation_type::terminal); });
  ctx.run_for(10s);
  ASSERT_TRUE(result);
  EXPECT_EQ(result->ret, "ERROR: job cmd.run was cancelled");
  EXPECT_FALSE(result->success);
  pid_t child = read_pid(pid_file);
  ASSERT_GT(child, 0);
  EXPECT_TRUE(process_gone(child));
}

// Python's shlex.split, as Salt splits cmd.script's args: inside double
// quotes only \" and \\ are escapes (shlex.split('"a\\$b"') is ['a\\$b']).
TEST(shlex_split, splits_as_python_does) {
  using v = std::vector<std::string>;
  EXPECT_EQ(shlex_split("t", "a 'b c' \"d e\" f\\ g"), (v{"a", "b c", "d e", "f g"}));
  EXPECT_EQ(shlex_split("t", "\"a\\$b\\`c\\\"d\\\\e\""), (v{"a\\$b\\`c\"d\\e"}));
  EXPECT_EQ(shlex_split("t", "'a\\b' \"\" x"), (v{"a\\b", "", "x"}));
  EXPECT_EQ(shlex_split("t", "  \t "), v{});
  EXPECT_THROW(shlex_split("t", "'open"), base::error);
  EXPECT_THROW(shlex_split("t", "end\\"), base::error);
}

}  // namespace
}  // namespace brine::modules
