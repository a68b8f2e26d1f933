#include "fileserver/path.h"

namespace brine::fileserver {

std::optional<url> parse_url(std::string_view text) {
  constexpr std::string_view scheme = "salt://";
  if (!text.starts_with(scheme)) return std::nullopt;
  text.remove_prefix(scheme.size());
  url out;
  auto q = text.find('?');
  out.path = std::string(text.substr(0, q));
  if (q != std::string_view::npos) {
    // Salt reads only saltenv from the query (and the old `env`).
    std::string_view query = text.substr(q + 1);
    while (!query.empty()) {
      auto amp = query.find('&');
      std::string_view pair = query.substr(0, amp);
      auto eq = pair.find('=');
      std::string_view key = pair.substr(0, eq);
      if (eq != std::string_view::npos && (key == "saltenv" || key == "env")) {
        out.saltenv = std::string(pair.substr(eq + 1));
      }
      if (amp == std::string_view::npos) break;
      query.remove_prefix(amp + 1);
    }
  }
  return out;
}

checked_path check_path(std::string_view raw, bool allow_empty) {
  checked_path out;
  for (unsigned char ch : raw) {
    if (ch < 0x20 || ch == 0x7f) {
      out.error = "control character in path";
      return out;
    }
    if (ch == '\\') {
      out.error = "backslash in path";
      return out;
    }
  }
  size_t at = 0;
  while (at <= raw.size()) {
    size_t slash = raw.find('/', at);
    if (slash == std::string_view::npos) slash = raw.size();
    std::string_view part = raw.substr(at, slash - at);
    at = slash + 1;
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      out.error = "'..' in path: it would leave the file roots";
      out.path.clear();
      return out;
    }
    if (!out.path.empty()) out.path += '/';
    out.path += part;
  }
  if (out.path.empty() && !allow_empty) out.error = "empty path";
  return out;
}

bool valid_saltenv(std::string_view env) {
  if (env.empty() || env == "." || env == ".." || env.size() > 255) return false;
  for (char ch : env) {
    bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '_' || ch == '-' || ch == '.';
    if (!ok) return false;
  }
  return true;
}

}  // namespace brine::fileserver
