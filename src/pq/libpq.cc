#include "pq/libpq.h"

#include <dlfcn.h>

#include <cctype>

#include "base/error.h"

namespace brine::pq {

const api& load(const std::string& who) {
  struct loaded {
    api functions;
    std::string error;
  };
  static const loaded lib = [] {
    loaded l;
    void* handle = ::dlopen("libpq.so.5", RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* e = ::dlerror();
      l.error = e ? e : "libpq.so.5: cannot load";
      return l;
    }
#define BRINE_LIBPQ_RESOLVE(f)                                           \
  l.functions.f = reinterpret_cast<decltype(&::f)>(::dlsym(handle, #f)); \
  if (l.functions.f == nullptr && l.error.empty()) {                     \
    l.error = "libpq.so.5 has no " #f " (libpq older than 10?)";         \
  }
    BRINE_LIBPQ_FUNCTIONS(BRINE_LIBPQ_RESOLVE)
#undef BRINE_LIBPQ_RESOLVE
    if (!l.error.empty()) return l;
    if (PQconninfoOption* defaults = l.functions.PQconndefaults()) {
      for (PQconninfoOption* o = defaults; o->keyword != nullptr; ++o) {
        l.functions.keywords.insert(o->keyword);
      }
      l.functions.PQconninfoFree(defaults);
    }
    return l;
  }();
  if (!lib.error.empty()) {
    throw base::error(who + ": cannot load libpq (" + lib.error + "); install the libpq5 package");
  }
  return lib.functions;
}

std::string first_line(std::string_view s) {
  s = s.substr(0, s.find('\n'));
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

std::string clean_message(const char* raw) {
  std::string s = first_line(raw ? raw : "");
  if (s.rfind("connection to server ", 0) == 0) {
    auto at = s.find(" failed: ");
    if (at != std::string::npos) s.erase(0, at + 9);
  }
  for (std::string_view severity : {"FATAL:  ", "ERROR:  "}) {
    if (s.rfind(severity, 0) == 0) s.erase(0, severity.size());
  }
  return s.empty() ? "no message from libpq" : s;
}

}  // namespace brine::pq
