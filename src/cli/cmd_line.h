#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"

namespace CLI {
class App;
}

// The command line of `brine cmd`, read by CLI11 or, for the plain lines
// that nearly every run uses, by a reader of its own: declaring cmd's two
// dozen options on a CLI::App costs about 400,000 instructions, a third of
// the command's whole life when its master is down.
namespace brine::cli {

struct cmd_line {
  std::string config;
  std::vector<std::string> words;  // TARGET FUN ARG...
  cmd_options cmd;                 // target, fun and words filled by finish()
};

// Declares Salt's target type flags (-E, -L, -G, -P, -I, -J, -S, -N, -C; at
// most one) on `sub`, each setting `tgt_type`: brine cmd's and brine
// inventory's.
void declare_target_flags(CLI::App& sub, std::string& tgt_type);

// Declares `brine cmd`'s options on `sub`, bound to `line`.
void declare_cmd_options(CLI::App& sub, cmd_line& line);

// `line` once parsed: words split into target, function and arguments.
void finish(cmd_line& line);

// The line `brine cmd ...` (argv[1] is "cmd") read without CLI11, or nullopt
// when it holds anything but the plain forms: `-c X`, `--config X`,
// `--config=X` and the like for every option, each at most once, values not
// starting with '-', numbers as digits with at most one '.', and positional
// words not starting with '-'. Help, `--`, attached short values (`-t5`),
// repeated options and every error are left to CLI11, which gives what it
// gives for them. A line this reads, CLI11 reads the same way
// (cli_test checks it).
std::optional<cmd_line> read_plain_cmd_line(int argc, char** argv);

}  // namespace brine::cli
