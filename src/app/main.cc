#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "cli/cli.h"

int main(int argc, char** argv) {
  int status = brine::cli::run(argc, argv);
  if (brine::cli::runs_daemon(argc, argv)) return status;
  // A client command has done all its work when run() returns (its store,
  // sockets and child processes are closed with run()'s locals). What exit()
  // would still do is tear down static objects that nothing reads again:
  // iostreams and locales, asio's and spdlog's registries, OpenSSL; 0.1 ms
  // of a command that lives 1 ms. The output is flushed and the process ends
  // without that.
  std::cout.flush();
  std::fflush(nullptr);
  std::_Exit(status);
}
