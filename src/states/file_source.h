#pragma once

// A file state's source as Salt's file.get_managed finds it on the minion:
// salt:// through the minion's file client, a local path or file://.

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

asio::awaitable<fetched> fetch_source(const state_call& c, std::string source, std::string saltenv);

}  // namespace brine::states
