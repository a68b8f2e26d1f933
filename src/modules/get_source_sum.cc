#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "fileserver/client.h"
#include "fileserver/path.h"
#include "modules/context.h"
#include "modules/source_sum.h"
#include "modules/url_cache.h"

// file.get_source_sum: the hash file a source_hash names, fetched and
// searched (the parsing is source_sum.cc's, which links without a minion).
namespace brine::modules {

namespace fs = std::filesystem;

namespace get_source_sum_impl {
namespace {

bool is_alnum(char ch) { return std::isalnum(static_cast<unsigned char>(ch)) != 0; }

std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

}  // namespace
}  // namespace get_source_sum_impl

asio::awaitable<source_sum> get_source_sum(minion_context& ctx, std::string file_name,
                                           std::string source, std::string source_hash,
                                           std::string source_hash_name, std::string saltenv) {
  using namespace get_source_sum_impl;
  std::string hash_file;
  if (source_hash.starts_with("/")) {
    hash_file = source_hash;
  } else {
    // urlparse's scheme: letters, digits, "+-." before the first ':'.
    std::string scheme;
    if (auto colon = source_hash.find(':'); colon != std::string::npos && colon > 0 &&
                                            std::isalpha(static_cast<unsigned char>(source_hash[0]))) {
      scheme = source_hash.substr(0, colon);
      for (char ch : scheme) {
        if (!is_alnum(ch) && ch != '+' && ch != '-' && ch != '.') {
          scheme.clear();
          break;
        }
      }
    }
    scheme = lower(scheme);
    if (scheme == "salt") {
      auto u = fileserver::parse_url(source_hash);
      std::vector<std::string> paths{u ? u->path : ""};
      std::string env = u && u->saltenv ? *u->saltenv : saltenv;
      auto got = co_await ctx.files().cache(env, std::move(paths));
      if (!got[0].error.empty()) throw base::error("Source hash file " + source_hash + " not found");
      hash_file = got[0].local;
    } else if (scheme == "file") {
      hash_file = source_hash.substr(7);
      std::error_code ec;
      if (!fs::is_regular_file(hash_file, ec)) {
        throw base::error("Source hash file " + source_hash + " not found");
      }
    } else if (is_remote_url(source_hash)) {
      std::string any;
      hash_file = co_await cache_url(ctx.opts(), source_hash, saltenv, any, true);
    } else if (scheme == "swift" || scheme == "s3") {
      throw base::error("Source hash file " + source_hash +
                        ": brine fetches hash files from salt://, file://, http(s):// and ftp://");
    } else if (!scheme.empty()) {
      invalid_source_hash(source_hash);
    }
  }
  if (hash_file.empty()) co_return parse_hash_expression(source_hash);
  std::ifstream in(hash_file, std::ios::binary);
  if (!in) throw base::error("Source hash file " + source_hash + " not found");
  std::ostringstream text;
  text << in.rdbuf();
  auto found = extract_hash(text.str(), "", file_name, source, source_hash_name);
  if (!found) invalid_source_hash(source_hash);
  found->hsum = lower(found->hsum);
  co_return *found;
}

}  // namespace brine::modules
