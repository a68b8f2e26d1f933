#include "states/file_util.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <fcntl.h>
#include <pcre2.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/error.h"

namespace brine::states {

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return s.str();
}

std::string write_file(const std::string& path, std::string_view data,
                       std::optional<mode_t> mode) {
  struct stat st {};
  bool existed = ::stat(path.c_str(), &st) == 0;
  std::string tmp = path + ".brine-tmp-" + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) return "Unable to write " + path + ": " + std::strerror(errno);
  std::size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::string why = std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      return "Unable to write " + path + ": " + why;
    }
    done += static_cast<std::size_t>(n);
  }
  if (mode) {
    ::fchmod(fd, *mode);
  } else if (existed) {
    ::fchmod(fd, st.st_mode & 07777);
    // Ownership stays as it was where we may set it (root); else ours.
    if (::fchown(fd, st.st_uid, st.st_gid) != 0) {
    }
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    return "Unable to replace " + path + ": " + why;
  }
  return "";
}

std::optional<mode_t> parse_mode(const nlohmann::ordered_json& v) {
  std::string text = v.is_string()             ? v.get<std::string>()
                     : v.is_number_integer() ? std::to_string(v.get<long long>())
                                             : "";
  if (text.empty() || text.size() > 5) return std::nullopt;
  mode_t m = 0;
  for (char ch : text) {
    if (ch < '0' || ch > '7') return std::nullopt;
    m = m * 8 + static_cast<mode_t>(ch - '0');
  }
  return m;
}

std::string mode_text(mode_t m) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(m & 07777));
  return buf;
}


std::string python_str(const nlohmann::ordered_json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_null()) return "None";
  return v.dump();
}

std::string python_type(const nlohmann::ordered_json& v) {
  if (v.is_string()) return "str";
  if (v.is_boolean()) return "bool";
  if (v.is_null()) return "NoneType";
  if (v.is_number_integer()) return "int";
  if (v.is_number_float()) return "float";
  if (v.is_array()) return "list";
  return "dict";
}

namespace {

bool py_space(char ch) {
  return ch == ' ' || (ch >= '\t' && ch <= '\r') || (ch >= '\x1c' && ch <= '\x1f');
}

bool strip_this(char ch, std::optional<std::string_view> chars) {
  return chars ? chars->find(ch) != std::string_view::npos : py_space(ch);
}

}  // namespace

std::string py_lstrip(std::string_view s, std::optional<std::string_view> chars) {
  std::size_t i = 0;
  while (i < s.size() && strip_this(s[i], chars)) ++i;
  return std::string(s.substr(i));
}

std::string py_rstrip(std::string_view s, std::optional<std::string_view> chars) {
  std::size_t n = s.size();
  while (n > 0 && strip_this(s[n - 1], chars)) --n;
  return std::string(s.substr(0, n));
}

std::string py_strip(std::string_view s, std::optional<std::string_view> chars) {
  return py_lstrip(py_rstrip(s, chars), chars);
}

std::vector<std::string> str_splitlines(std::string_view text, bool keepends) {
  std::vector<std::string> out;
  std::size_t start = 0, i = 0;
  while (i < text.size()) {
    unsigned char ch = static_cast<unsigned char>(text[i]);
    std::size_t len = 0;  // length of the line break at i
    if (ch == '\r') {
      len = i + 1 < text.size() && text[i + 1] == '\n' ? 2 : 1;
    } else if (ch == '\n' || ch == '\v' || ch == '\f' || (ch >= 0x1c && ch <= 0x1e)) {
      len = 1;
    } else if (ch == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) == 0x85) {
      len = 2;
    } else if (ch == 0xe2 && i + 2 < text.size() && static_cast<unsigned char>(text[i + 1]) == 0x80 &&
               (static_cast<unsigned char>(text[i + 2]) == 0xa8 ||
                static_cast<unsigned char>(text[i + 2]) == 0xa9)) {
      len = 3;
    }
    if (len == 0) {
      ++i;
      continue;
    }
    out.emplace_back(text.substr(start, (keepends ? i + len : i) - start));
    i += len;
    start = i;
  }
  if (start < text.size()) out.emplace_back(text.substr(start));
  return out;
}

std::string universal_newlines(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\r') {
      out += '\n';
      if (i + 1 < text.size() && text[i + 1] == '\n') ++i;
    } else {
      out += text[i];
    }
  }
  return out;
}

}  // namespace brine::states
