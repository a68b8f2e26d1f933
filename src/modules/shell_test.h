#pragma once

#include <optional>
#include <string_view>

// The shell's `test` builtin, for a command that is nothing else: `test
// ARGS` or `[ ARGS ]` of plain words (no quoting, expansion, globbing,
// redirection or second command), with POSIX's rules for one to four
// arguments and the primaries -e -f -d -s -h -L -b -c -p -S -n -z = !=
// and `!`. State runs ask `unless: test -e /path` hundreds of times; a
// shell started for each costs more than the rest of the run. The answer is
// the exit status /bin/sh would give (0 true, 1 false), or nullopt for
// anything else (other primaries, a relative path, a syntax error), which
// the caller runs with the shell as before.
namespace brine::modules {

std::optional<int> shell_test(std::string_view command);

}  // namespace brine::modules
