// libFuzzer target: arbitrary bytes as an apt sources file (sources.list,
// sources.list.d/*.list), through the parser of Salt's one-line format and
// back out through render(). The files are the machine's, but any tool may
// have written them: it must never crash or hang, and a line with at most
// one option block (right after the type) and one '#' must render to a line that parses again to
// the same source. (With more, Salt's option search reaches into the
// comment, and so does brine's: there is no stable form to hold it to.)
#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <string_view>

#include "modules/apt_sources.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace apt = brine::modules::apt;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const auto& e : apt::parse_file(text, "/etc/apt/sources.list")) {
    if (e.line.find('\n') != std::string::npos) __builtin_trap();
    if (e.invalid) continue;
    if (e.type.empty() || e.uri.empty() || e.dist.empty()) __builtin_trap();
    const std::string out = e.render();
    if (out.find('\n') != std::string::npos) __builtin_trap();
    apt::source_entry again = apt::parse_line(out);
    auto count = [&](char ch) { return std::count(e.line.begin(), e.line.end(), ch); };
    if (count('#') > 1 || count('[') > 1 || count(']') > 1) continue;
    // A '[' that is not the option block (Salt renders its options anyway).
    if (count('[') == 1 && e.options.empty()) continue;
    // Binary bytes (Python's split() and C's isspace() disagree on some), or
    // an option given twice (Salt keeps the last, and a word of the first).
    if (std::any_of(e.line.begin(), e.line.end(),
                    [](char ch) { return (ch < 0x20 && ch != '\t') || ch > 0x7e; })) {
      continue;
    }
    std::size_t words_in_brackets = 0;
    for (char ch : e.line.substr(0, e.line.find(']'))) words_in_brackets += ch == '=';
    if (words_in_brackets > e.options.size()) continue;
    if (again.invalid || again.type != e.type || again.disabled != e.disabled ||
        again.uri != e.uri || again.dist != e.dist || again.comps != e.comps) {
      __builtin_trap();
    }
  }
  apt::split_list(text);
  apt::strip_uri(text);
  return 0;
}
