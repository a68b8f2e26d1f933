// Salt's file.cached and file.not_cached: a URL (salt://, http, https,
// ftp) in the minion's cache, checked against source_hash, or a local
// file's presence and hash; archive.extracted caches its source through
// file.cached as Salt's does.

#include <filesystem>

#include "base/error.h"
#include "base/python_truth.h"
#include "http/client.h"
#include "modules/context.h"
#include "modules/source_sum.h"
#include "modules/url_cache.h"
#include "states/file_states.h"
#include "states/file_util.h"
#include "states/registry.h"

namespace brine::states {
namespace file_cache_states {
namespace {

namespace fs = std::filesystem;
using plain_json = nlohmann::json;

std::string text_arg(const state_call& c, const char* key, const std::string& fallback = "") {
  const json* v = c.arg(key);
  if (v == nullptr || v->is_null()) return fallback;
  return v->is_string() ? v->get<std::string>() : v->dump();
}

// urlparse's scheme of `name` ("" for a path).
std::string scheme_of(const std::string& name) {
  auto colon = name.find("://");
  if (colon == std::string::npos) return "";
  return name.substr(0, colon);
}

std::string hash_type_option(const state_call& c) {
  if (c.context == nullptr) return "sha256";
  const auto& opts = c.context->opts();
  auto t = opts.find("hash_type");
  return t != opts.end() && t->is_string() ? t->get<std::string>() : "sha256";
}

asio::awaitable<std::string> is_cached(const state_call& c, std::string name, std::string saltenv) {
  plain_json args = plain_json::array({name});
  plain_json kwargs = {{"saltenv", saltenv}};
  json got = co_await c.run("cp.is_cached", std::move(args), std::move(kwargs));
  co_return got.is_string() ? got.get<std::string>() : std::string();
}

asio::awaitable<std::string> hash_of(const state_call& c, std::string path, std::string type) {
  plain_json args = plain_json::array({path});
  plain_json kwargs = {{"form", type}};
  json got = co_await c.run("file.get_hash", std::move(args), std::move(kwargs));
  co_return got.is_string() ? got.get<std::string>() : std::string();
}

asio::awaitable<json> not_cached(state_call c) {
  std::string name = c.name();
  json ret = sorted_ret(name, false);
  std::string scheme = scheme_of(name);
  if (scheme.empty() || scheme == "file") {
    std::string path = scheme.empty() ? name : name.substr(7);
    std::error_code ec;
    fs::path real = fs::weakly_canonical(expand_user(path), ec);
    ret["result"] = true;
    ret["comment"] = "File " + (ec ? path : real.string()) + " is a local path, no action taken";
    co_return ret;
  }
  std::string saltenv = text_arg(c, "saltenv", "base");
  std::string local = co_await is_cached(c, name, saltenv);
  if (local.empty()) {
    ret["result"] = true;
    ret["comment"] = name + " is not cached";
    co_return ret;
  }
  std::error_code ec;
  fs::remove(local, ec);
  if (ec) {
    ret["comment"] = "Failed to delete " + local + ": " + ec.message();
    co_return ret;
  }
  ret["result"] = true;
  ret["changes"]["deleted"] = true;
  ret["comment"] = local + " was deleted";
  co_return ret;
}

}  // namespace
}  // namespace file_cache_states

asio::awaitable<json> file_cached(state_call c) {
  using namespace file_cache_states;
  std::string name = c.name();
  json ret = sorted_ret(name, false);
  std::string scheme = scheme_of(name);
  std::string source_hash = text_arg(c, "source_hash");
  bool skip_verify = c.flag("skip_verify");
  bool use_etag = c.flag("use_etag");
  std::string saltenv = text_arg(c, "saltenv", "base");
  std::string shown = http::redact_url(name);
  if (!skip_verify && source_hash.empty() && !use_etag && modules::is_remote_url(name)) {
    ret["comment"] = "Unable to verify upstream hash of source file " + shown +
                     ", please set source_hash or set skip_verify or use_etag to True";
    co_return ret;
  }
  std::optional<modules::source_sum> sum;
  if (!source_hash.empty()) {
    if (c.context == nullptr) co_return failed_ret(ret, "file.cached needs a minion");
    std::string error;
    std::string no_file;
    std::string hash_name = text_arg(c, "source_hash_name");
    try {
      sum = co_await modules::get_source_sum(*c.context, no_file, name, source_hash, hash_name,
                                             saltenv);
    } catch (const base::error& e) {
      error = e.what();
    }
    if (!error.empty()) co_return failed_ret(ret, error);
  }
  if (c.test) {
    std::string local = co_await is_cached(c, name, saltenv);
    if (local.empty()) {
      ret["comment"] = "File will be cached: " + name;
    } else if (!sum) {
      ret["comment"] = "No hash found. File will be cached: " + name;
    } else {
      std::string type = hash_type_option(c);
      std::string have = co_await hash_of(c, local, type);
      ret["comment"] = have == sum->hsum ? "File already cached: " + name
                                         : "Hashes don't match.\nFile will be cached: " + name;
    }
    ret["result"] = nullptr;
    co_return ret;
  }
  if (scheme.empty() || scheme == "file") {
    std::string path = scheme.empty() ? name : name.substr(7);
    std::error_code ec;
    fs::path real_path = fs::weakly_canonical(expand_user(path), ec);
    std::string full = ec ? path : real_path.string();
    if (!fs::exists(full, ec)) {
      ret["comment"] = "File " + full + " is not present on the minion";
      co_return ret;
    }
    if (skip_verify || !sum) {
      ret["result"] = true;
      ret["comment"] = "File " + full + " is present on the minion";
      co_return ret;
    }
    std::string have = co_await hash_of(c, full, sum->hash_type);
    if (have == sum->hsum) {
      ret["result"] = true;
      ret["comment"] = "File " + full + " is present on the minion and has hash " + have;
    } else {
      ret["comment"] = "File " + full + " is present on the minion, but the hash (" + have +
                       ") does not match the specified hash (" + sum->hsum + ")";
    }
    co_return ret;
  }
  std::string type = sum ? sum->hash_type : hash_type_option(c);
  std::string before = co_await is_cached(c, name, saltenv);
  json pre = nullptr;
  if (!before.empty()) pre = co_await hash_of(c, before, type);
  std::string local;
  std::string error;
  try {
    plain_json args = plain_json::array({name});
    plain_json kwargs = {{"saltenv", saltenv}, {"source_hash", sum ? json(sum->hsum) : json()},
                         {"use_etag", use_etag}};
    json got = co_await c.run("cp.cache_file", std::move(args), std::move(kwargs));
    if (got.is_string()) local = got.get<std::string>();
  } catch (const base::error& e) {
    error = http::redact_url(e.what());
  }
  if (!error.empty()) co_return failed_ret(ret, error);
  if (local.empty()) {
    ret["comment"] = "Failed to cache " + shown + ", check minion log for more information";
    co_return ret;
  }
  std::string post = co_await hash_of(c, local, type);
  if (pre != json(post)) ret["changes"]["hash"] = {{"old", pre}, {"new", post}};
  if (!skip_verify && sum) {
    if (post == sum->hsum) {
      ret["result"] = true;
      ret["comment"] = "File is already cached to " + local + " with hash " + post;
    } else {
      ret["comment"] = "File is cached to " + local + ", but the hash (" + post +
                       ") does not match the specified hash (" + sum->hsum + ")";
    }
    co_return ret;
  }
  ret["result"] = true;
  ret["comment"] = "File is cached to " + local;
  co_return ret;
}

void register_file_cache_states(registry& reg) {
  using namespace file_cache_states;
  reg.add("file.cached", file_cached, {"name"},
          "file.cached name=URL|PATH [source_hash=] [source_hash_name=] [skip_verify=False] "
          "[saltenv=base]: URL (salt://, http, https, ftp) is in the minion's cache with "
          "source_hash; a local PATH is present (with that hash)");
  reg.add("file.not_cached", not_cached, {"name"},
          "file.not_cached name=URL [saltenv=base]: URL is not in the minion's cache (a local "
          "path is left alone)");
}

}  // namespace brine::states
