#pragma once

// Salt's unified diff: salt.utils.stringutils.get_diff(a, b), which is
// "".join(difflib.unified_diff(a, b)), reproduced byte for byte (Python
// 3.11's difflib, the one Salt 3006 runs on).
//
// What that means for a caller, as Salt shows it:
//   - a and b are lists of lines that keep their line endings; the diff's
//     lines are " ", "-" or "+" and the line as it is, so a last line
//     without a newline runs straight into the next diff line (difflib
//     writes no "\ No newline at end of file");
//   - the header is "--- \n+++ \n" (no file names, no dates; with names:
//     "--- a\n+++ b\n", a date after a tab), then "@@ -R +R @@\n" hunks
//     with 3 lines of context, ranges in difflib's "ed" form ("3" for one
//     line, "3,0" for none, "3,5");
//   - equal inputs give "" (no header at all);
//   - the matching is difflib's SequenceMatcher (longest matching block
//     first, recursively; with 200 or more lines in b, a line that occurs
//     in more than 1% of b + 1 times is "popular" and matched only as an
//     extension of a neighbour), so which lines show as changed is exactly
//     what Python picks, not a minimal edit script.
//
// Salt builds its lists differently per function: file.managed (through
// file.get_diff) reads both files in binary mode with readlines(), lines
// split after "\n" only (read_lines); file.replace uses bytes.splitlines(
// True), which also splits at a lone "\r" (split_lines). file.append and
// file.prepend call difflib themselves with lines stripped of their ends
// and join with "\n" (unified_diff with its default lineterm, joined).
//
// Pure functions; thread-safe.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace brine::modules {

struct diff_options {
  std::string fromfile;
  std::string tofile;
  std::string fromfiledate;
  std::string tofiledate;
  // Lines of context around a change.
  std::size_t n = 3;
  // What ends the "---", "+++" and "@@" lines (never the content lines).
  std::string lineterm = "\n";
};

// difflib.unified_diff(a, b, ...): the lines it yields, in order.
std::vector<std::string> unified_diff(const std::vector<std::string>& a,
                                      const std::vector<std::string>& b,
                                      const diff_options& options = {});

// salt.utils.stringutils.get_diff(a, b): the lines of unified_diff joined
// with nothing between them.
std::string get_diff(const std::vector<std::string>& a, const std::vector<std::string>& b);

// Python's readlines() on a file opened in binary mode: each line keeps its
// "\n"; the last one may have none. "" gives no lines.
std::vector<std::string> read_lines(std::string_view text);

// Python's bytes.splitlines(keepends=True): lines end at "\n", "\r\n" or a
// lone "\r", each kept.
std::vector<std::string> split_lines(std::string_view text);

// The opcodes of difflib's SequenceMatcher(None, a, b).get_opcodes(), for
// tests and for callers that need difflib's alignment itself.
struct diff_opcode {
  enum kind { equal, replace, remove, insert } tag;
  std::size_t i1, i2, j1, j2;
};
std::vector<diff_opcode> diff_opcodes(const std::vector<std::string>& a,
                                      const std::vector<std::string>& b);

}  // namespace brine::modules
