#include "cli/cli.h"

int main(int argc, char** argv) { return brine::cli::run(argc, argv); }
