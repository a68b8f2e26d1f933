#pragma once

// Python's string semantics where Salt's derivations depend on them, for the
// ASCII range (bytes of multi-byte UTF-8 characters count as word characters,
// as the letters they encode do in Python). Private to the grains module.

#include <cctype>
#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace brine::grains::text {

inline bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

inline bool is_ascii_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

// Python's \w.
inline bool is_word(char c) {
  return static_cast<unsigned char>(c) >= 0x80 || is_ascii_alnum(c) || c == '_';
}

inline std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

inline std::string strip_chars(std::string_view s, std::string_view chars) {
  size_t b = s.find_first_not_of(chars);
  if (b == std::string_view::npos) return "";
  size_t e = s.find_last_not_of(chars);
  return std::string(s.substr(b, e - b + 1));
}

// str.strip() / str.rstrip() without arguments.
inline std::string strip(std::string_view s) { return strip_chars(s, " \t\n\r\f\v"); }

inline std::string rstrip(std::string_view s) {
  size_t e = s.find_last_not_of(" \t\n\r\f\v");
  return e == std::string_view::npos ? "" : std::string(s.substr(0, e + 1));
}

inline bool istarts_with(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[i])) !=
        std::tolower(static_cast<unsigned char>(prefix[i]))) {
      return false;
    }
  }
  return true;
}

// Lines as a Python text-mode file yields them (universal newlines: \n, \r\n
// and \r end a line), without their ends.
inline std::vector<std::string_view> lines(std::string_view s) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\n' && s[i] != '\r') continue;
    out.push_back(s.substr(start, i - start));
    if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
    start = i + 1;
  }
  if (start < s.size()) out.push_back(s.substr(start));
  return out;
}

// str.split(sep): empty fields kept, "" gives [""].
inline std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t pos = s.find(sep, start);
    out.emplace_back(s.substr(start, pos == std::string_view::npos ? pos : pos - start));
    if (pos == std::string_view::npos) return out;
    start = pos + 1;
  }
}

// str.split(): runs of whitespace separate, no empty fields.
inline std::vector<std::string> split_ws(std::string_view s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && is_space(s[i])) ++i;
    size_t b = i;
    while (i < s.size() && !is_space(s[i])) ++i;
    if (i > b) out.emplace_back(s.substr(b, i - b));
  }
  return out;
}

// int(s): surrounding whitespace, an optional sign, digits with single
// underscores between them; nullopt where Python raises (or for values
// outside int64).
inline std::optional<int64_t> py_int(std::string_view s) {
  std::string t = strip(s);
  std::string digits;
  bool negative = false;
  size_t i = 0;
  if (i < t.size() && (t[i] == '+' || t[i] == '-')) negative = t[i++] == '-';
  for (; i < t.size(); ++i) {
    if (t[i] >= '0' && t[i] <= '9') {
      digits += t[i];
    } else if (t[i] != '_' || digits.empty() || i + 1 >= t.size() || t[i + 1] < '0' ||
               t[i + 1] > '9') {
      return std::nullopt;
    }
  }
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (digits.empty() || ec != std::errc() || ptr != digits.data() + digits.size()) {
    return std::nullopt;
  }
  return negative ? -v : v;
}

}  // namespace brine::grains::text
