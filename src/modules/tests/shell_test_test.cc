// The in-process `test` builtin against the real /bin/sh: wherever it
// answers, its answer is the shell's exit status; what it cannot answer
// exactly it leaves to the shell.

#include "modules/shell_test.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace brine::modules {
namespace shell_test_test {
namespace {

namespace fs = std::filesystem;

int sh(const std::string& command) {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

class shell_test_test : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/brine-shell-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::ofstream(dir_ + "/file") << "x";
    std::ofstream(dir_ + "/empty");
    fs::create_directory(dir_ + "/dir");
    fs::create_symlink(dir_ + "/file", dir_ + "/link");
    fs::create_symlink(dir_ + "/gone", dir_ + "/dangling");
    ASSERT_EQ(::mkfifo((dir_ + "/fifo").c_str(), 0600), 0);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_F(shell_test_test, answers_as_the_shell_does) {
  std::vector<std::string> paths = {"file", "empty", "dir", "link", "dangling", "fifo", "missing"};
  std::vector<std::string> ops = {"-e", "-f", "-d", "-s", "-h", "-L", "-p", "-b", "-c", "-S"};
  int answered = 0;
  for (const auto& op : ops) {
    for (const auto& p : paths) {
      std::string path = dir_ + "/" + p;
      for (const std::string& command :
           {"test " + op + " " + path, "[ " + op + " " + path + " ]", "test ! " + op + " " + path,
            "[ ! " + op + " " + path + " ]", "  test\t" + op + "  " + path + " "}) {
        auto got = shell_test(command);
        ASSERT_TRUE(got.has_value()) << command;
        EXPECT_EQ(*got, sh(command)) << command;
        ++answered;
      }
    }
  }
  for (const char* command :
       {"test", "[ ]", "test x", "test -n abc", "test -z abc", "test ! abc", "test abc = abc",
        "test abc = abd", "test abc != abd", "[ a=b ]", "test ! a = a", "test -e", "[ -z ]",
        "test ! = x", "test ! -n abc"}) {
    auto got = shell_test(command);
    ASSERT_TRUE(got.has_value()) << command;
    EXPECT_EQ(*got, sh(command)) << command;
    ++answered;
  }
  EXPECT_GT(answered, 300);
}

TEST_F(shell_test_test, leaves_to_the_shell_what_it_cannot_answer_exactly) {
  for (const std::string& command : std::vector<std::string>{
           "test -e relative/path", "test -e " + dir_ + "/file && true", "test -e $HOME",
        "test -e " + dir_ + "/*", "test -e '" + dir_ + "'", "test -e ~/x", "test -x /bin/sh",
        "test 1 -eq 1", "test a -a b", "test -e /a -o -e /b", "[ -e /tmp", "test ( -e /tmp )",
        "/usr/bin/test -e /tmp", "FOO=1 test -e /tmp", "! test -e /tmp", "test -e /tmp; echo",
        "test -e /tmp > /dev/null", "test foo bar", "test -e /tmp`id`", "test -e \"/tmp\"",
        "test -e /t\\mp", "true", "test -e /tmp\necho", "test -e /tmp #c"}) {
    EXPECT_FALSE(shell_test(command).has_value()) << command;
  }
}

}  // namespace
}  // namespace shell_test_test
}  // namespace brine::modules
