#pragma once

namespace brine::cli {

// Parses the command line and runs the subcommand; returns the exit status.
// Every error a user can cause ends here as one line on stderr.
int run(int argc, char** argv);

// Whether the command line names a subcommand that runs until it is stopped
// (master, minion, swarm) rather than a client command that lives a few
// milliseconds. Reads only argv and constants and allocates nothing: the
// allocator choice (src/app/allocator.cc) asks it before the first
// allocation of the process.
bool runs_daemon(int argc, char** argv);

}  // namespace brine::cli
