#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include <asio/awaitable.hpp>

// A user as other modules need one (ssh keys live in its home, cron runs as
// it): looked up through NSS off the caller's executor, by the user module.
namespace brine::modules {

struct account {
  std::string name;
  std::string home;
  uid_t uid = 0;
  gid_t gid = 0;
};

// nullopt when there is no such user; a lookup that fails throws
// tool_failure.
asio::awaitable<std::optional<account>> find_account(std::string name);

}  // namespace brine::modules
