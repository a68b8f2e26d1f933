#include "modules/shell_test.h"

#include <sys/stat.h>

#include <string>
#include <vector>

namespace brine::modules {
namespace {

// Characters a word may hold and still mean itself to the shell.
bool plain(char ch) {
  if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9')) {
    return true;
  }
  switch (ch) {
    case '/': case '.': case '_': case '-': case '+': case ',': case ':': case '@': case '%':
    case '=': case '!':
      return true;
    default:
      return false;
  }
}

// The words of `command`, or nullopt when the shell would do more with it
// than split it at blanks.
std::optional<std::vector<std::string_view>> words_of(std::string_view command) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < command.size()) {
    char ch = command[i];
    if (ch == ' ' || ch == '\t') {
      ++i;
      continue;
    }
    size_t start = i;
    while (i < command.size() && command[i] != ' ' && command[i] != '\t') {
      if (!plain(command[i])) {
        // `[` and `]` only as words of their own (elsewhere: a glob).
        bool bracket = (command[i] == '[' || command[i] == ']') && i == start &&
                       (i + 1 == command.size() || command[i + 1] == ' ' || command[i + 1] == '\t');
        if (!bracket) return std::nullopt;
      }
      ++i;
    }
    words.push_back(command.substr(start, i - start));
  }
  return words;
}

using args = std::vector<std::string_view>;

std::optional<bool> unary(std::string_view op, std::string_view operand) {
  if (op == "-n") return !operand.empty();
  if (op == "-z") return operand.empty();
  if (op.size() != 2 || op[0] != '-') return std::nullopt;
  // File tests: absolute paths only (a relative one depends on the cwd the
  // command would have run in).
  if (operand.empty() || operand[0] != '/') return std::nullopt;
  std::string path(operand);
  struct stat st {};
  char kind = op[1];
  if (kind == 'h' || kind == 'L') return ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
  bool found = ::stat(path.c_str(), &st) == 0;
  switch (kind) {
    case 'e': return found;
    case 'f': return found && S_ISREG(st.st_mode);
    case 'd': return found && S_ISDIR(st.st_mode);
    case 's': return found && st.st_size > 0;
    case 'b': return found && S_ISBLK(st.st_mode);
    case 'c': return found && S_ISCHR(st.st_mode);
    case 'p': return found && S_ISFIFO(st.st_mode);
    case 'S': return found && S_ISSOCK(st.st_mode);
    default: return std::nullopt;
  }
}

bool binary_op(std::string_view op) {
  return op == "=" || op == "!=" || op == "-eq" || op == "-ne" || op == "-gt" || op == "-ge" ||
         op == "-lt" || op == "-le" || op == "-nt" || op == "-ot" || op == "-ef" || op == "-a" ||
         op == "-o";
}

// POSIX's test with 0 to 4 arguments.
std::optional<bool> evaluate(const args& a) {
  switch (a.size()) {
    case 0:
      return false;
    case 1:
      return !a[0].empty();
    case 2:
      if (a[0] == "!") return a[1].empty();
      return unary(a[0], a[1]);
    case 3:
      if (binary_op(a[1])) {
        if (a[1] == "=") return a[0] == a[2];
        if (a[1] == "!=") return a[0] != a[2];
        return std::nullopt;
      }
      if (a[0] == "!") {
        auto inner = evaluate(args(a.begin() + 1, a.end()));
        if (!inner) return std::nullopt;
        return !*inner;
      }
      return std::nullopt;
    case 4:
      if (a[0] == "!") {
        auto inner = evaluate(args(a.begin() + 1, a.end()));
        if (!inner) return std::nullopt;
        return !*inner;
      }
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

}  // namespace

std::optional<int> shell_test(std::string_view command) {
  auto words = words_of(command);
  if (!words || words->empty()) return std::nullopt;
  args a(words->begin() + 1, words->end());
  if ((*words)[0] == "[") {
    if (a.empty() || a.back() != "]") return std::nullopt;
    a.pop_back();
  } else if ((*words)[0] != "test") {
    return std::nullopt;
  }
  for (auto w : a) {
    if (w == "[" || w == "]" || w == "(" || w == ")") return std::nullopt;
  }
  auto truth = evaluate(a);
  if (!truth) return std::nullopt;
  return *truth ? 0 : 1;
}

}  // namespace brine::modules
