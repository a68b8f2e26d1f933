#pragma once

#include <string>
#include <string_view>

namespace brine::base {

// Appends Python's repr() of the str `s`: single quotes unless the text holds
// a single quote and no double one, backslash escapes for the quote, `\`,
// `\n`, `\r`, `\t`, and `\xNN` for other control characters. What Salt
// prints (--out raw), what Jinja shows, and what Python's str() of a list
// gives for grain matching all use this one spelling.
void append_python_repr(std::string_view s, std::string& out);

inline std::string python_repr(std::string_view s) {
  std::string out;
  append_python_repr(s, out);
  return out;
}

}  // namespace brine::base
