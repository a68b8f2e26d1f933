#pragma once

#include <cstddef>
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

// Python's len() of the str held as UTF-8 in `s`: its code points (bytes that
// do not continue a sequence). Jinja's length, |truncate and format widths
// count this way.
inline std::size_t python_len(std::string_view s) {
  std::size_t n = 0;
  for (unsigned char c : s)
    if ((c & 0xc0) != 0x80) ++n;
  return n;
}

// Python's s.replace(old, new): every occurrence, left to right, none
// overlapping (`old` not empty).
inline std::string python_replace(std::string s, std::string_view old, std::string_view with) {
  for (std::size_t at = s.find(old); at != std::string::npos; at = s.find(old, at + with.size())) {
    s.replace(at, old.size(), with);
  }
  return s;
}

// Python's urllib.parse.quote(s, safe): every byte but ASCII letters,
// digits, "_.-~" and those of `safe` as %XX (upper case). quote_plus:
// a space as "+", and nothing else safe but `safe`.
std::string url_quote(std::string_view s, std::string_view safe = "/");
std::string url_quote_plus(std::string_view s, std::string_view safe = "");

// Python's text.replace(r"\n", "\n"): each backslash-n pair a newline, as
// Salt reads cmd.run's stdin and the gpg renderer its blocks.
inline std::string expand_backslash_n(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size() && text[i + 1] == 'n') {
      out += '\n';
      ++i;
    } else {
      out += text[i];
    }
  }
  return out;
}

}  // namespace brine::base
