#include "states/file_source.h"

#include <filesystem>

#include "fileserver/client.h"
#include "fileserver/path.h"
#include "http/client.h"
#include "modules/context.h"
#include "modules/source_sum.h"
#include "modules/url_cache.h"
#include "states/file_util.h"

namespace brine::states {

namespace fs = std::filesystem;

namespace file_source_impl {
namespace {

std::string text_arg(const state_call& c, const char* key) {
  const json* v = c.arg(key);
  if (v == nullptr || v->is_null()) return "";
  return v->is_string() ? v->get<std::string>() : v->dump();
}

// An http, https or ftp source as get_managed and manage_file take it.
asio::awaitable<fetched> fetch_remote(const state_call& c, source_ref ref, std::string saltenv,
                                      bool in_list, bool templated) {
  fetched out;
  std::string shown = http::redact_url(ref.source);
  if (c.context == nullptr) {
    out.error = "Source file " + shown + ": http, https and ftp sources need a minion";
    co_return out;
  }
  bool skip_verify = c.flag("skip_verify");
  bool use_etag = c.flag("use_etag");
  bool verify_ssl = c.flag("verify_ssl", true);
  if (in_list) {
    std::string why = co_await modules::url_answers(ref.source, verify_ssl);
    if (!why.empty()) {
      out.missing = true;
      out.error = "Source file " + shown + ": " + why;
      co_return out;
    }
  }
  std::optional<modules::source_sum> sum;
  if (!skip_verify) {
    if (!ref.source_hash.empty()) {
      std::string name = c.name();
      std::string hash_name = text_arg(c, "source_hash_name");
      try {
        sum = co_await modules::get_source_sum(*c.context, name, ref.source, ref.source_hash,
                                               hash_name, saltenv);
      } catch (const base::error& e) {
        out.error = e.what();
      }
      if (!out.error.empty()) co_return out;
    } else if (!use_etag) {
      out.error = "Unable to verify upstream hash of source file " + shown +
                  ", please set source_hash or set skip_verify to True";
      co_return out;
    }
  }
  // Salt's early check: an existing file that already has the declared
  // hash is not fetched; its text is what the source declares.
  std::error_code ec;
  if (sum && !templated && c.flag("replace", true) && fs::is_regular_file(c.name(), ec)) {
    std::string name = c.name();
    std::string type = sum->hash_type;
    std::string have = co_await modules::digest_on_pool(name, type);
    if (have == sum->hsum) {
      out.local = c.name();
      out.text = read_file(out.local);
      if (out.text) co_return out;
    }
  }
  // skip_verify takes a copy already cached as it is.
  if (skip_verify) out.local = modules::cached_url(c.context->opts(), saltenv, ref.source);
  if (out.local.empty()) {
    std::string want = sum ? sum->hsum : "";
    try {
      out.local = co_await modules::cache_url(c.context->opts(), ref.source, saltenv, want,
                                              verify_ssl);
    } catch (const base::error& e) {
      out.error = "Failed to cache " + shown + ": " + e.what();
    }
    if (!out.error.empty()) co_return out;
  }
  // manage_file's check of what came (a run that writes, of the file as
  // it came, not as a template renders it).
  if (sum && !use_etag && !templated && !c.test) {
    std::string local = out.local;
    std::string type = sum->hash_type;
    std::string got = co_await modules::digest_on_pool(local, type);
    if (got != sum->hsum) {
      out.error = "Specified " + sum->hash_type + " checksum for " + ref.source + " (" +
                  sum->hsum + ") does not match actual checksum (" + got +
                  "). If the 'source_hash' value refers to a remote file with multiple possible "
                  "matches, then it may be necessary to set 'source_hash_name'.";
      co_return out;
    }
  }
  out.text = read_file(out.local);
  if (!out.text) out.error = "Source file '" + shown + "' not found";
  co_return out;
}

}  // namespace
}  // namespace file_source_impl

asio::awaitable<fetched> fetch_source(const state_call& c, source_ref ref, std::string saltenv,
                                      bool in_list, bool templated) {
  if (modules::is_remote_url(ref.source)) {
    fetched remote = co_await file_source_impl::fetch_remote(c, std::move(ref), std::move(saltenv),
                                                             in_list, templated);
    co_return remote;
  }
  std::string source = std::move(ref.source);
  fetched out;
  if (auto u = fileserver::parse_url(source)) {
    auto checked = fileserver::check_path(u->path);
    if (!checked.error.empty()) {
      out.error = "Source file " + source + ": " + checked.error;
      co_return out;
    }
    std::string env = u->saltenv.value_or(saltenv);
    if (c.context == nullptr) {
      out.error = "Source file " + source + ": salt:// needs a minion";
      co_return out;
    }
    std::vector<std::string> paths{checked.path};
    auto got = co_await c.context->files().cache(env, std::move(paths));
    if (!got[0].error.empty()) {
      out.missing = true;
      out.error = "Source file " + source + " not found in saltenv '" + env + "'";
      co_return out;
    }
    out.local = got[0].local;
  } else if (source.starts_with("file://") || source.starts_with("/")) {
    out.local = source.starts_with("file://") ? source.substr(7) : source;
    std::error_code ec;
    if (!fs::is_regular_file(out.local, ec)) {
      out.missing = true;
      out.error = "Local file source " + out.local + " does not exist";
      co_return out;
    }
  } else {
    out.error = "Source file " + source +
                ": brine fetches salt://, http://, https://, ftp://, file:// and local "
                "paths; other schemes are not supported yet";
    co_return out;
  }
  out.text = read_file(out.local);
  if (!out.text) out.error = "Source file " + source + " cannot be read";
  co_return out;
}

}  // namespace brine::states
