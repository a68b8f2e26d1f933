#include "modules/archive_listing.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <set>

namespace brine::modules {
namespace {

// The rest of `line` after `fields` whitespace-separated fields.
std::optional<std::string> after_fields(const std::string& line, int fields) {
  std::size_t i = 0;
  for (int f = 0; f < fields; ++f) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i == line.size()) return std::nullopt;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
  }
  while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
  if (i == line.size()) return std::nullopt;
  return line.substr(i);
}

bool octal(char ch) { return ch >= '0' && ch <= '7'; }

}  // namespace

std::string tar_unescape(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    char n = s[++i];
    switch (n) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case 'f': out += '\f'; break;
      case 'v': out += '\v'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case '?': out += '\x7f'; break;
      default:
        if (octal(n) && i + 2 < s.size() && octal(s[i + 1]) && octal(s[i + 2])) {
          out += static_cast<char>(((n - '0') << 6) | ((s[i + 1] - '0') << 3) | (s[i + 2] - '0'));
          i += 2;
        } else {
          out += n;
        }
    }
  }
  return out;
}

std::vector<std::string> output_lines(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    out.push_back(std::move(line));
    start = end + 1;
  }
  return out;
}

listing parse_tar_listing(const std::string& text) {
  listing out;
  for (const auto& line : output_lines(text)) {
    if (line.empty()) continue;
    auto rest = after_fields(line, 5);
    if (!rest) continue;
    std::string member = *rest;
    char type = line[0];
    if (type == 'l') {
      member = member.substr(0, member.find(" -> "));
    } else if (type == 'h') {
      member = member.substr(0, member.find(" link to "));
    }
    member = tar_unescape(member);
    // Python's tarfile drops a directory's trailing slashes.
    while (member.size() > 1 && member.back() == '/') member.pop_back();
    if (member.empty()) continue;
    if (type == 'l') {
      out.links.push_back(member);
    } else if (type == 'd') {
      out.dirs.push_back(member + "/");
    } else {
      out.files.push_back(member);
    }
  }
  return out;
}

listing parse_zip_listing(const std::string& text) {
  listing out;
  std::set<std::string> dirs;
  for (const auto& line : output_lines(text)) {
    if (line.size() < 10 || std::string("-dlbcps?").find(line[0]) == std::string::npos) continue;
    // mode, version, os, size, type, csize, method, date, time, name
    auto rest = after_fields(line, 9);
    if (!rest) continue;
    const std::string& member = *rest;
    if (line[0] == 'l') {
      out.links.push_back(member);
    } else if (line[0] == 'd' || member.ends_with("/")) {
      dirs.insert(member.ends_with("/") ? member : member + "/");
    } else {
      out.files.push_back(member);
    }
  }
  std::vector<std::string> files = out.files;
  for (const auto& path : files) {
    auto slash = path.rfind('/');
    if (slash == std::string::npos) continue;
    std::string dirname = path.substr(0, slash + 1);
    dirs.insert(dirname);
    out.files.erase(std::remove(out.files.begin(), out.files.end(), dirname), out.files.end());
  }
  out.dirs.assign(dirs.begin(), dirs.end());
  return out;
}

std::optional<std::string> guess_archive_type(std::string name) {
  for (auto& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  for (const char* ending : {"tar", "tar.gz", "tgz", "tar.bz2", "tbz2", "tbz", "tar.xz", "txz",
                             "tar.lzma", "tlz"}) {
    if (name.ends_with(std::string(".") + ending)) return "tar";
  }
  if (name.ends_with(".zip")) return "zip";
  if (name.ends_with(".rar")) return "rar";
  return std::nullopt;
}

}  // namespace brine::modules
