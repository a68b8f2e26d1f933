#pragma once

#include <cstdlib>
#include <string>

// The Python that can import jinja2, for the differential tests: Debian's
// /usr/bin/python3 with python3-jinja2 (what CI installs) when it has it,
// else the first python3 on PATH; empty when neither has jinja2.
namespace brine::render::testing {

inline std::string python_with_jinja2() {
  for (const char* python : {"/usr/bin/python3", "python3"}) {
    std::string cmd = std::string(python) + " -c 'import jinja2' >/dev/null 2>&1";
    if (std::system(cmd.c_str()) == 0) return python;
  }
  return "";
}

}  // namespace brine::render::testing
