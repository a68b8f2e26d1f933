// Source hashes (src/modules/source_sum.h): what a state's source_hash
// names, and the hash files a minion fetches from wherever a formula
// points it (http, https, ftp, salt://), searched by Salt's extract_hash.
// The first line of the input is the source_hash expression, the second the
// file name, the third source_hash_name, the rest the hash file. Only
// base::error may come out of parse_hash_expression; every hash either
// gives has its type's length, an expression's in lower case (Salt takes
// "sha256=" and 64 characters of anything: that digest never matches) and
// a hash file's in hex.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

#include "base/error.h"
#include "modules/source_sum.h"

namespace {

std::string next_line(std::istringstream& in) {
  std::string line;
  std::getline(in, line);
  return line;
}

void check(const brine::modules::source_sum& s, bool expression) {
  if (s.hash_type.empty() || brine::modules::hash_type_of_length(s.hsum.size()) != s.hash_type) {
    std::abort();
  }
  for (char ch : s.hsum) {
    if (expression) {
      if (ch >= 'A' && ch <= 'Z') std::abort();
      continue;
    }
    bool hex = (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');
    if (!hex) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  std::string expression = next_line(in);
  std::string file_name = next_line(in);
  std::string hash_name = next_line(in);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  try {
    check(brine::modules::parse_hash_expression(expression), true);
  } catch (const brine::base::error&) {
  }
  for (const char* type : {"", "md5", "sha256", "sha512", "crc"}) {
    if (auto found = brine::modules::extract_hash(text, type, file_name,
                                                  "https://example.org/" + file_name, hash_name)) {
      check(*found, false);
    }
  }
  return 0;
}
