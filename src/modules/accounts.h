#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include <asio/awaitable.hpp>

namespace brine::modules {

// A user as other modules need one (ssh keys live in its home, cron runs as
// it): looked up through NSS off the caller's executor, by the user module.
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

// Users and groups as NSS answers them (getpwnam_r, getgrgid_r, ...), for
// the file states and functions that name owners. Thread-safe. Answers are
// kept while /etc/passwd and /etc/group stay unchanged, and for one second
// at most (for NSS sources other than those files): a 200-state run asks
// the same few questions hundreds of times, and each asked of NSS reads
// /etc/passwd from the start.
namespace brine::modules::accounts {

struct user_entry {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;  // primary group
  std::string home;
  std::string shell;
};

std::optional<user_entry> user_by_name(const std::string& name);
std::optional<user_entry> user_by_uid(uid_t uid);
std::optional<gid_t> group_id(const std::string& name);
std::optional<std::string> group_name(gid_t gid);

// The name of `uid` (`gid`), or the number as text when it has none.
std::string user_name_or_number(uid_t uid);
std::string group_name_or_number(gid_t gid);

}  // namespace brine::modules::accounts
