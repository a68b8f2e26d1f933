#include "cli/cmd_line.h"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace brine::cli {
namespace {

struct argv_holder {
  explicit argv_holder(std::vector<std::string> words) : words_(std::move(words)) {
    for (auto& w : words_) pointers_.push_back(w.data());
  }
  int argc() const { return static_cast<int>(pointers_.size()); }
  char** argv() { return pointers_.data(); }

 private:
  std::vector<std::string> words_;
  std::vector<char*> pointers_;
};

// CLI11's reading of `brine cmd ...`, as cli.cc declares it.
std::optional<cmd_line> read_with_cli11(std::vector<std::string> words) {
  CLI::App app;
  app.require_subcommand(1);
  auto* sub = app.add_subcommand("cmd", "");
  cmd_line line;
  declare_cmd_options(*sub, line);
  argv_holder a(std::move(words));
  try {
    app.parse(a.argc(), a.argv());
  } catch (const CLI::ParseError&) {
    return std::nullopt;
  }
  finish(line);
  return line;
}

void expect_same(const cmd_line& a, const cmd_line& b) {
  EXPECT_EQ(a.config, b.config);
  EXPECT_EQ(a.cmd.target, b.cmd.target);
  EXPECT_EQ(a.cmd.tgt_type, b.cmd.tgt_type);
  EXPECT_EQ(a.cmd.delimiter, b.cmd.delimiter);
  EXPECT_EQ(a.cmd.fun, b.cmd.fun);
  EXPECT_EQ(a.cmd.words, b.cmd.words);
  EXPECT_EQ(a.cmd.timeout, b.cmd.timeout);
  EXPECT_EQ(a.cmd.out, b.cmd.out);
  EXPECT_EQ(a.cmd.async, b.cmd.async);
  EXPECT_EQ(a.cmd.progress, b.cmd.progress);
  EXPECT_EQ(a.cmd.static_out, b.cmd.static_out);
  EXPECT_EQ(a.cmd.hide_timeout, b.cmd.hide_timeout);
  EXPECT_EQ(a.cmd.show_jid, b.cmd.show_jid);
  EXPECT_EQ(a.cmd.batch, b.cmd.batch);
  EXPECT_EQ(a.cmd.batch_wait, b.cmd.batch_wait);
}

// Every line the plain reader takes, CLI11 reads to the same options; the
// lines it leaves to CLI11 are the ones it must not guess at.
TEST(CmdLine, PlainReaderAgreesWithCli11OrDeclines) {
  struct sample {
    std::vector<std::string> words;
    bool plain;
  };
  const std::vector<sample> samples = {
      {{"brine", "cmd", "*", "test.ping"}, true},
      {{"brine", "cmd", "-c", "m.yaml", "*", "test.ping"}, true},
      {{"brine", "cmd", "--config=m.yaml", "-t", "3", "web*", "cmd.run", "ls -l /"}, true},
      {{"brine", "cmd", "--timeout", "0.5", "*", "test.echo", "hi", "a=b"}, true},
      {{"brine", "cmd", "*", "test.ping", "-t", "7", "--out", "json"}, true},
      {{"brine", "cmd", "--out=yaml", "--static", "--hide-timeout", "--show-jid", "*", "x.y"}, true},
      {{"brine", "cmd", "-b", "10%", "--batch-wait", "2", "*", "test.ping"}, true},
      {{"brine", "cmd", "--batch-size", "5", "*", "test.ping"}, true},
      {{"brine", "cmd", "--async", "--no-progress", "*", "test.ping"}, true},
      {{"brine", "cmd", "-G", "os:Debian", "test.ping"}, true},
      {{"brine", "cmd", "--compound", "G@os:Debian and web*", "test.ping"}, true},
      {{"brine", "cmd", "-I", "--delimiter", "/", "role/web", "test.ping"}, true},
      {{"brine", "cmd", "-L", "a,b", "test.ping"}, true},
      {{"brine", "cmd", "-N", "group", "test.ping"}, true},
      {{"brine", "cmd", "-S", "10.0.0.0/8", "test.ping"}, true},
      {{"brine", "cmd", "-t", "05", "*", "test.ping"}, true},
      // Left to CLI11: help, errors, and forms the reader does not take.
      {{"brine", "cmd", "--help"}, false},
      {{"brine", "cmd", "-h"}, false},
      {{"brine", "cmd", "*"}, false},
      {{"brine", "cmd"}, false},
      {{"brine", "cmd", "-t", "0", "*", "test.ping"}, false},
      {{"brine", "cmd", "-t", "-1", "*", "test.ping"}, false},
      {{"brine", "cmd", "-t", "1e3", "*", "test.ping"}, false},
      {{"brine", "cmd", "-t5", "*", "test.ping"}, false},
      {{"brine", "cmd", "--out", "xml", "*", "test.ping"}, false},
      {{"brine", "cmd", "-E", "-G", "x", "test.ping"}, false},
      {{"brine", "cmd", "-t", "1", "-t", "2", "*", "test.ping"}, false},
      {{"brine", "cmd", "--static", "--static", "*", "test.ping"}, false},
      {{"brine", "cmd", "--static=true", "*", "test.ping"}, false},
      {{"brine", "cmd", "--", "*", "test.ping"}, false},
      {{"brine", "cmd", "*", "test.echo", "-5"}, false},
      {{"brine", "cmd", "--unknown", "*", "test.ping"}, false},
      {{"brine", "cmd", "-c", "", "*", "test.ping"}, false},
      {{"brine", "cmd", "-c"}, false},
      {{"brine", "cmd", "--batch-wait", "-1", "*", "test.ping"}, false},
      {{"brine", "--version", "cmd", "*", "test.ping"}, false},
      {{"brine", "key", "list"}, false},
  };
  for (const auto& s : samples) {
    std::string shown;
    for (const auto& w : s.words) shown += "'" + w + "' ";
    SCOPED_TRACE(shown);
    argv_holder a(s.words);
    auto plain = read_plain_cmd_line(a.argc(), a.argv());
    ASSERT_EQ(plain.has_value(), s.plain);
    if (!plain) continue;
    auto full = read_with_cli11(s.words);
    ASSERT_TRUE(full.has_value()) << "CLI11 refuses a line the plain reader took";
    expect_same(*plain, *full);
  }
}

}  // namespace
}  // namespace brine::cli
