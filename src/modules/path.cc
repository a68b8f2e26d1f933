#include "modules/path.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>

#include "modules/accounts.h"

namespace brine::modules {

std::string expand_user(const std::string& path) {
  if (path.empty() || path[0] != '~') return path;
  auto slash = path.find('/');
  std::string user = path.substr(1, slash == std::string::npos ? std::string::npos : slash - 1);
  std::string home;
  if (user.empty()) {
    if (const char* h = ::getenv("HOME")) home = h;
    if (home.empty()) {
      if (auto u = accounts::user_by_uid(::geteuid())) home = u->home;
    }
  } else if (auto u = accounts::user_by_name(user)) {
    home = u->home;
  }
  if (home.empty()) return path;
  return home + (slash == std::string::npos ? "" : path.substr(slash));
}

}  // namespace brine::modules
