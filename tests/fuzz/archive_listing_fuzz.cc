// The archive listings (src/modules/archive_listing.h): arbitrary text as
// GNU tar's and zipinfo's output. Nothing may crash; every name a listing
// gives is non-empty, and a directory ends in '/'.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "modules/archive_listing.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  for (const auto& l : {brine::modules::parse_tar_listing(text),
                        brine::modules::parse_zip_listing(text)}) {
    for (const auto& d : l.dirs) {
      if (d.empty() || d.back() != '/') std::abort();
    }
    for (const auto& f : l.files) {
      if (f.empty()) std::abort();
    }
  }
  brine::modules::tar_unescape(text);
  return 0;
}
