#include "base/python.h"

#include <cctype>

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

namespace {

std::string quote_with(std::string_view s, std::string_view safe, bool plus) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (plus && c == ' ') {
      out += '+';
    } else if (std::isalnum(c) != 0 || std::string_view("_.-~").find(static_cast<char>(c)) !=
                                           std::string_view::npos ||
               safe.find(static_cast<char>(c)) != std::string_view::npos) {
      out += static_cast<char>(c);
    } else {
      static constexpr char k_hex[] = "0123456789ABCDEF";
      out += '%';
      out += k_hex[c >> 4];
      out += k_hex[c & 15];
    }
  }
  return out;
}

}  // namespace

std::string url_quote(std::string_view s, std::string_view safe) {
  return quote_with(s, safe, false);
}

std::string url_quote_plus(std::string_view s, std::string_view safe) {
  return quote_with(s, safe, true);
}

}  // namespace brine::base
