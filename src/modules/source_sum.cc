#include "modules/source_sum.h"

#include <algorithm>
#include <cctype>
#include <sstream>
#include <vector>

#include "base/error.h"

namespace brine::modules {

namespace source_sum_impl {
namespace {

// Salt's HASHES, in its order (the order its messages list them in).
const std::vector<std::pair<std::string, std::size_t>>& hashes() {
  static const std::vector<std::pair<std::string, std::size_t>> k = {
      {"sha512", 128}, {"sha384", 96}, {"sha256", 64}, {"sha224", 56}, {"sha1", 40}, {"md5", 32}};
  return k;
}

std::size_t length_of(const std::string& type) {
  for (const auto& [t, n] : hashes()) {
    if (t == type) return n;
  }
  return 0;
}

std::string lower(std::string s) {
  for (auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

bool is_space(char ch) { return std::isspace(static_cast<unsigned char>(ch)) != 0; }
bool is_alnum(char ch) { return std::isalnum(static_cast<unsigned char>(ch)) != 0; }
bool is_hex(char ch) { return std::isxdigit(static_cast<unsigned char>(ch)) != 0; }

[[noreturn]] void invalid_format_impl(const std::string& source_hash) {
  // HASHES_REVMAP sorted by length.
  std::string types;
  for (auto it = hashes().rbegin(); it != hashes().rend(); ++it) {
    if (!types.empty()) types += ", ";
    types += it->first + " (" + std::to_string(it->second) + ")";
  }
  throw base::error("Source hash " + source_hash +
                    " format is invalid. The supported formats are: 1) a hash, 2) an expression "
                    "in the format <hash_type>=<hash>, or 3) either a path to a local file "
                    "containing hashes, or a URI of a remote hash file. Supported protocols for "
                    "remote hash files are: salt, file, http, https, ftp, swift, s3. The hash may "
                    "also not be of a valid length, the following are supported hash types and "
                    "lengths: " +
                    types + ".");
}

std::string strip(const std::string& s) {
  auto b = s.find_first_not_of(" \t\n\r\f\v");
  if (b == std::string::npos) return "";
  auto e = s.find_last_not_of(" \t\n\r\f\v");
  return s.substr(b, e - b + 1);
}

// re.search(r"(?i)(?<![a-z0-9])([a-f0-9]{N,M})(?![a-z0-9])", line).
std::optional<std::string> first_digest(const std::string& line, std::size_t min, std::size_t max) {
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (!is_hex(line[i]) || (i > 0 && is_alnum(line[i - 1]))) continue;
    std::size_t j = i;
    while (j < line.size() && is_hex(line[j])) ++j;
    std::size_t n = j - i;
    if (n >= min && n <= max && (j == line.size() || !is_alnum(line[j]))) return line.substr(i, n);
    i = j;
  }
  return std::nullopt;
}

// Salt's test of a line against a name: it ends with the name's basename
// after one of `separators`, or starts with the whole name and whitespace.
bool names(const std::string& line, const std::string& whole, const std::string& base,
           const std::string& separators) {
  if (line.ends_with(base)) {
    if (line.size() < base.size() + 1) return false;
    return separators.find(line[line.size() - base.size() - 1]) != std::string::npos;
  }
  return line.starts_with(whole) && line.size() > whole.size() && is_space(line[whole.size()]);
}

std::string basename_of(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace
}  // namespace source_sum_impl

void invalid_source_hash(const std::string& source_hash) {
  source_sum_impl::invalid_format_impl(source_hash);
}

std::string hash_type_of_length(std::size_t length) {
  for (const auto& [t, n] : source_sum_impl::hashes()) {
    if (n == length) return t;
  }
  return "";
}

source_sum parse_hash_expression(const std::string& source_hash) {
  using namespace source_sum_impl;
  source_sum r;
  if (auto eq = source_hash.find('='); eq != std::string::npos) {
    r.hash_type = strip(source_hash.substr(0, eq));
    r.hsum = strip(source_hash.substr(eq + 1));
  } else {
    if (source_hash.empty() ||
        !std::all_of(source_hash.begin(), source_hash.end(), [](char ch) { return is_hex(ch); })) {
      invalid_format_impl(source_hash);
    }
    r.hsum = source_hash;
    r.hash_type = hash_type_of_length(source_hash.size());
    if (r.hash_type.empty()) invalid_format_impl(source_hash);
  }
  std::size_t want = length_of(r.hash_type);
  if (want == 0) {
    std::string types;
    for (const auto& [t, n] : hashes()) types += (types.empty() ? "" : ", ") + t;
    throw base::error("Invalid hash type '" + r.hash_type + "'. Supported hash types are: " +
                      types + ". Either remove the hash type and simply use '" + r.hsum +
                      "' as the source_hash, or change the hash type to a supported type.");
  }
  std::string by_length = hash_type_of_length(r.hsum.size());
  if (by_length.empty()) invalid_format_impl(source_hash);
  if (r.hsum.size() != want) {
    throw base::error("Invalid length (" + std::to_string(r.hsum.size()) + ") for hash type '" +
                      r.hash_type + "'. Either remove the hash type and simply use '" + r.hsum +
                      "' as the source_hash, or change the hash type to '" + by_length + "'");
  }
  r.hsum = lower(r.hsum);
  return r;
}

std::optional<source_sum> extract_hash(const std::string& text, const std::string& hash_type,
                                       const std::string& file_name, const std::string& source,
                                       const std::string& source_hash_name) {
  using namespace source_sum_impl;
  std::size_t want = length_of(hash_type);
  std::size_t min = want != 0 ? want : 32;
  std::size_t max = want != 0 ? want : 128;
  const std::string separators = std::string(" \t\n\r\v\f") + "\\/*";
  std::string file_base = basename_of(file_name);
  std::string source_base;
  if (!source.empty()) {
    // os.path.basename(urlparse(source).path or netloc)
    std::string rest = source;
    if (auto s = rest.find("://"); s != std::string::npos) {
      rest = rest.substr(s + 3);
      auto slash = rest.find_first_of("/?#");
      std::string netloc = rest.substr(0, slash);
      std::string path = slash == std::string::npos ? "" : rest.substr(slash);
      path = path.substr(0, path.find_first_of("?#"));
      rest = path.empty() ? netloc : path;
    }
    source_base = basename_of(rest);
  }
  std::optional<source_sum> partial;
  std::optional<source_sum> by_hash_name, by_file_name, by_source;
  std::istringstream in(text);
  for (std::string raw; std::getline(in, raw);) {
    std::string line = strip(raw);
    auto digest = first_digest(line, min, max);
    if (!digest) continue;
    std::string type = hash_type_of_length(digest->size());
    if (type.empty()) continue;
    source_sum matched{type, *digest};
    if (!partial) partial = matched;
    if (!source_hash_name.empty() && !by_hash_name &&
        names(line, source_hash_name, source_hash_name, " \t\n\r\v\f")) {
      by_hash_name = matched;
    }
    if (!file_name.empty() && !by_file_name && names(line, file_name, file_base, separators)) {
      by_file_name = matched;
    }
    if (!source.empty() && !by_source && names(line, source, source_base, separators)) {
      by_source = matched;
    }
  }
  for (auto* found : {&by_hash_name, &by_file_name, &by_source, &partial}) {
    if (*found) return **found;
  }
  return std::nullopt;
}

}  // namespace brine::modules
