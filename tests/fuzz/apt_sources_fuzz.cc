// libFuzzer target: arbitrary bytes as an apt sources file (sources.list,
// sources.list.d/*.list), through the parser of Salt's one-line format and
// back out through render(). The files are the machine's, but any tool may
// have written them: it must never crash or hang, and what it renders must
// parse again to the same source.
#include <cstddef>
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
    apt::source_entry again = apt::parse_line(e.render());
    if (again.invalid || again.type != e.type || again.disabled != e.disabled) __builtin_trap();
  }
  apt::split_list(text);
  apt::strip_uri(text);
  return 0;
}
