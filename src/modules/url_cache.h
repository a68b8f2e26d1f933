#pragma once

#include <asio/awaitable.hpp>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

// Remote file sources (http, https, ftp) in the minion's cache, as Salt's
// file client keeps them: <cachedir>/extrn_files/<saltenv>/<host[port]>/<path>.
// Downloads run on a pool of their own, never on the caller's executor.
namespace brine::modules {

// Whether `source` is a URL this cache fetches (http://, https://, ftp://).
bool is_remote_url(std::string_view source);

// Where `url` is cached for `saltenv` under `cachedir` (Salt's
// _extrn_path: no credentials, the port's colon dropped, "-<query>" after
// the path, a sha256 of a path longer than 255 characters). Throws
// base::error when the URL's path leaves that directory.
std::string extrn_path(const std::string& cachedir, const std::string& saltenv,
                       const std::string& url);

// cp.is_cached of a remote URL: its cached copy, or "".
std::string cached_url(const nlohmann::json& opts, const std::string& saltenv,
                       const std::string& url);

// cp.cache_file of a remote URL: the cached copy when `source_hash` (a
// digest, or TYPE=DIGEST) is given and matches it, else the URL fetched
// anew (to a part file, renamed into place). Throws base::error in Salt's
// words ("Error: [Errno -2] Name or service not known reading /path",
// "Error: HTTP 404: Not Found reading /path"). Options: cachedir, and
// http_request_timeout (seconds, default 3600).
asio::awaitable<std::string> cache_url(const nlohmann::json& opts, std::string url,
                                       std::string saltenv, std::string source_hash,
                                       bool verify_ssl);

// The hex digest of a file in `hash_type` ("" if it cannot be read),
// computed on the download pool: a cached archive can be large.
asio::awaitable<std::string> digest_on_pool(std::string path, std::string hash_type);

// Whether `url` answers (a HEAD request, as file.source_list asks): "" when
// it does, else why not.
asio::awaitable<std::string> url_answers(std::string url, bool verify_ssl);

}  // namespace brine::modules
