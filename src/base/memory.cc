#include "base/memory.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace brine::base {

namespace {

struct mapping {
  uintptr_t begin = 0;
  uintptr_t end = 0;
  bool candidate = false;  // read-only, private, backed by a file
  size_t rss_kib = 0;
  // Pages copied on write: this process's own content, which dropping
  // would lose. Dirty page-cache pages (tmpfs) are not among them.
  size_t anonymous_kib = 0;
};

// "7f12a000-7f12b000 r-xp 00001000 08:01 1234   /usr/lib/libssl.so.3"
bool parse_header(const std::string& line, mapping& m) {
  unsigned long long begin = 0, end = 0, offset = 0, inode = 0;
  char perms[8] = {};
  char dev[16] = {};
  int path_at = 0;
  if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %15s %llu %n", &begin, &end, perms, &offset,
                  dev, &inode, &path_at) < 6) {
    return false;
  }
  m = mapping{};
  m.begin = begin;
  m.end = end;
  const char* path = line.c_str() + path_at;
  m.candidate = perms[1] != 'w' && perms[3] == 'p' && inode != 0 && path[0] == '/';
  return true;
}

size_t field_kib(const std::string& line, const char* name) {
  size_t n = std::strlen(name);
  if (line.compare(0, n, name) != 0) return SIZE_MAX;
  return std::strtoull(line.c_str() + n, nullptr, 10);
}

}  // namespace

released_pages release_clean_file_pages() {
  std::ifstream smaps("/proc/self/smaps");
  if (!smaps) return {};
  std::vector<mapping> maps;
  std::string line;
  mapping current;
  bool have = false;
  while (std::getline(smaps, line)) {
    mapping next;
    if (parse_header(line, next)) {
      if (have) maps.push_back(current);
      current = next;
      have = true;
      continue;
    }
    if (!have) continue;
    if (size_t v = field_kib(line, "Rss:"); v != SIZE_MAX) current.rss_kib = v;
    if (size_t v = field_kib(line, "Anonymous:"); v != SIZE_MAX) current.anonymous_kib = v;
  }
  if (have) maps.push_back(current);

  released_pages out;
  for (const auto& m : maps) {
    if (!m.candidate || m.rss_kib == 0 || m.anonymous_kib != 0) continue;
    if (::madvise(reinterpret_cast<void*>(m.begin), m.end - m.begin, MADV_DONTNEED) == 0) {
      ++out.mappings;
      out.bytes += m.rss_kib * 1024;
    }
  }
  return out;
}

}  // namespace brine::base
