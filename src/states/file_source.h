#pragma once

// A file state's source as Salt's file.source_list and file.get_managed find
// it on the minion: salt:// through the minion's file client, a local path
// or file://, or an http, https or ftp URL in the minion's cache, checked
// against its source_hash.

#include <asio/awaitable.hpp>
#include <optional>
#include <string>

#include "states/registry.h"

namespace brine::states {

// A source's text and where it lies on the minion; `missing` when it is
// not there (the next of a source list is tried), `error` Salt's comment.
struct fetched {
  std::optional<std::string> text;
  std::string local;
  bool missing = false;
  std::string error;
};

// A source and the source_hash that goes with it (a source list item's
// own, {url: hash}, else the state's source_hash).
struct source_ref {
  std::string source;
  std::string source_hash;
};

// `in_list`: one of several sources, so a URL that does not answer a HEAD
// request is `missing` (Salt's source_list). `templated`: the text is
// rendered next, so a remote source's digest is not checked against its
// source_hash (Salt checks the rendered file's). The state's skip_verify,
// use_etag, verify_ssl and source_hash_name apply.
asio::awaitable<fetched> fetch_source(const state_call& c, source_ref source, std::string saltenv,
                                      bool in_list, bool templated);

}  // namespace brine::states
