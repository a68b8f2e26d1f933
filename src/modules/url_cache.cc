#include "modules/url_cache.h"

#include <unistd.h>

#include <asio/thread_pool.hpp>
#include <atomic>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/on_pool.h"
#include "fileserver/roots.h"
#include "http/client.h"
#include "modules/digest.h"
#include "modules/source_sum.h"

namespace brine::modules {

namespace fs = std::filesystem;

namespace url_cache_impl {
namespace {

// Downloads wait on the network, not on a core: a few at once.
asio::thread_pool& download_pool() {
  static asio::thread_pool pool = [] {
    http::preload();
    return asio::thread_pool(4);
  }();
  return pool;
}

// The parts of a URL Salt's urlparse gives _extrn_path and get_url.
struct url_parts {
  std::string scheme;
  std::string netloc;
  std::string path;
  std::string query;
};

url_parts parse(const std::string& url) {
  url_parts u;
  auto colon = url.find("://");
  std::string rest = url;
  if (colon != std::string::npos) {
    u.scheme = url.substr(0, colon);
    rest = url.substr(colon + 3);
    auto end = rest.find_first_of("/?#");
    u.netloc = rest.substr(0, end);
    rest = end == std::string::npos ? "" : rest.substr(end);
  }
  if (auto hash = rest.find('#'); hash != std::string::npos) rest.resize(hash);
  if (auto q = rest.find('?'); q != std::string::npos) {
    u.query = rest.substr(q + 1);
    rest.resize(q);
  }
  u.path = rest;
  return u;
}

}  // namespace
}  // namespace url_cache_impl

bool is_remote_url(std::string_view source) {
  return source.starts_with("http://") || source.starts_with("https://") ||
         source.starts_with("ftp://");
}

std::string extrn_path(const std::string& cachedir, const std::string& saltenv,
                       const std::string& url) {
  using namespace url_cache_impl;
  url_parts u = parse(url);
  std::string netloc = u.netloc;
  if (auto at = netloc.rfind('@'); at != std::string::npos) netloc = netloc.substr(at + 1);
  // "host:8080" -> "host8080" (Salt drops the colon when there is a port).
  if (auto c = netloc.rfind(':'); c != std::string::npos && c + 1 < netloc.size() &&
                                  netloc.find_first_not_of("0123456789", c + 1) == std::string::npos) {
    netloc.erase(c, 1);
  }
  std::string file_name = u.query.empty() ? u.path : u.path + "-" + u.query;
  fs::path root = fs::path(cachedir) / "extrn_files" / saltenv / netloc;
  fs::path wanted = (root / fs::path(file_name).relative_path()).lexically_normal();
  std::string r = root.lexically_normal().string();
  std::string w = wanted.string();
  if (w != r && !w.starts_with(r + "/")) {
    throw base::error("Invalid path: " + http::redact_url(url) + " leaves the cache directory " + r);
  }
  if (file_name.size() > 255) file_name = fileserver::hash_bytes(file_name);
  return (root / fs::path(file_name).relative_path()).string();
}

std::string cached_url(const nlohmann::json& opts, const std::string& saltenv,
                       const std::string& url) {
  std::string cachedir = opts.value("cachedir", "");
  if (cachedir.empty()) return "";
  std::string path;
  try {
    path = extrn_path(cachedir, saltenv, url);
  } catch (const base::error&) {
    return "";
  }
  std::error_code ec;
  return fs::exists(path, ec) ? path : "";
}

asio::awaitable<std::string> cache_url(const nlohmann::json& opts, std::string url,
                                       std::string saltenv, std::string source_hash,
                                       bool verify_ssl) {
  using namespace url_cache_impl;
  std::string cachedir = opts.value("cachedir", "");
  if (cachedir.empty()) {
    throw base::error("cannot cache " + http::redact_url(url) +
                      ": the minion has no cachedir; set cachedir in its configuration");
  }
  std::string dest = extrn_path(cachedir, saltenv, url);
  http::get_options o;
  o.verify_tls = verify_ssl;
  o.timeout = std::chrono::seconds(3600);
  if (auto t = opts.find("http_request_timeout"); t != opts.end() && t->is_number()) {
    o.timeout = std::chrono::seconds(t->get<long>());
  }
  struct result {
    std::string dest;
    std::string error;
  };
  std::function<result()> work = [dest, url, source_hash, o]() -> result {
    result r;
    // A cached copy with the wanted digest is not fetched again.
    if (!source_hash.empty()) {
      std::string want = source_hash.substr(source_hash.rfind('=') + 1);
      std::string type = hash_type_of_length(want.size());
      std::error_code ec;
      if (!type.empty() && fs::is_regular_file(dest, ec) && file_digest(dest, type) == want) {
        r.dest = dest;
        return r;
      }
    }
    std::error_code ec;
    fs::create_directories(fs::path(dest).parent_path(), ec);
    if (ec) {
      r.error = "cannot create " + fs::path(dest).parent_path().string() + ": " + ec.message();
      return r;
    }
    // Each download writes a part file of its own: two jobs fetching the
    // same URL never write into one file.
    static std::atomic<unsigned> counter{0};
    std::string part = dest + ".part." + std::to_string(::getpid()) + "." +
                       std::to_string(counter.fetch_add(1));
    try {
      http::transfer t = http::download(url, part, o);
      std::string path = parse(url).path;
      if (!t.error.empty()) {
        r.error = "Error: " + t.error + " reading " + path;
      } else if (!url.starts_with("ftp://") && (t.status < 200 || t.status >= 300)) {
        r.error = "Error: HTTP " + std::to_string(t.status) + ": " + http::reason_phrase(t.status) +
                  " reading " + path;
      }
    } catch (const base::error& e) {
      r.error = e.what();
    }
    if (!r.error.empty()) {
      fs::remove(part, ec);
      return r;
    }
    fs::rename(part, dest, ec);
    if (ec) {
      r.error = "cannot move " + part + " to " + dest + ": " + ec.message();
      fs::remove(part, ec);
      return r;
    }
    r.dest = dest;
    return r;
  };
  result r = co_await base::on_pool<result>(download_pool(), std::move(work));
  if (!r.error.empty()) throw base::error(r.error);
  co_return r.dest;
}

asio::awaitable<std::string> digest_on_pool(std::string path, std::string hash_type) {
  using namespace url_cache_impl;
  std::function<std::string()> work = [path, hash_type] { return file_digest(path, hash_type); };
  std::string digest = co_await base::on_pool<std::string>(download_pool(), std::move(work));
  co_return digest;
}

asio::awaitable<std::string> url_answers(std::string url, bool verify_ssl) {
  using namespace url_cache_impl;
  http::get_options o;
  o.verify_tls = verify_ssl;
  o.timeout = std::chrono::seconds(60);
  std::function<std::string()> work = [url, o]() -> std::string {
    try {
      http::transfer t = http::head(url, o);
      if (!t.error.empty()) return t.error;
      if (!url.starts_with("ftp://") && (t.status < 200 || t.status >= 400)) {
        return "HTTP " + std::to_string(t.status) + ": " + http::reason_phrase(t.status);
      }
      return "";
    } catch (const base::error& e) {
      return e.what();
    }
  };
  std::string why = co_await base::on_pool<std::string>(download_pool(), std::move(work));
  co_return why;
}

}  // namespace brine::modules
