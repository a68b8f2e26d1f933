#pragma once

namespace brine::cli {

// Parses the command line and runs the subcommand; returns the exit status.
// Every error a user can cause ends here as one line on stderr.
int run(int argc, char** argv);

}  // namespace brine::cli
