#include "base/python.h"

#include <cstdio>

namespace brine::base {

void append_python_repr(std::string_view s, std::string& out) {
  char q =
      s.find('\'') != std::string_view::npos && s.find('"') == std::string_view::npos ? '"' : '\'';
  out += q;
  for (unsigned char c : s) {
    if (c == static_cast<unsigned char>(q) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += q;
}

}  // namespace brine::base
