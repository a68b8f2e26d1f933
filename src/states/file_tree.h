#pragma once

// What Salt's directory-wide file states (file.directory, file.recurse)
// share: os.walk as Salt's _depth_limited_walk uses it, include/exclude
// patterns, and Salt's ownership and mode checks (_check_dir_meta,
// file.check_perms, _check_user).

#include <sys/types.h>

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace brine::states {

// salt.utils.files.normalize_mode: a mode as text, zero-padded to four
// digits ("0644" for 644, "644", "0644", "0o644"); nullopt for null.
std::optional<std::string> normalize_mode(const nlohmann::ordered_json& v);

// Salt's file.user_to_uid and group_to_gid: an int is the id itself,
// anything else a name looked up; nullopt for a name with no account.
std::optional<uid_t> uid_of(const nlohmann::ordered_json& user);
std::optional<gid_t> gid_of(const nlohmann::ordered_json& group);

// salt.utils.stringutils.check_include_exclude: whether `path` matches
// include_pat (when given) and not exclude_pat (when given). A pattern is a
// glob (fnmatch), or "E@regex" searched anywhere in `path`; a list matches
// when any item does. Throws base::error for a regex PCRE2 rejects.
bool check_include_exclude(std::string_view path, const nlohmann::ordered_json* include_pat,
                           const nlohmann::ordered_json* exclude_pat);

// One level of Python's os.walk (top-down): the directory, then its
// subdirectories and files in the order the directory lists them (what
// os.listdir gives). A symlink to a directory counts as a directory but is
// not entered.
struct walk_level {
  std::string root;
  std::vector<std::string> dirs;
  std::vector<std::string> files;
};
// Salt's _depth_limited_walk: the levels of `top` less than max_depth below
// it (all when nullopt); nothing when `top` is not a directory.
std::vector<walk_level> depth_limited_walk(const std::string& top,
                                           std::optional<long long> max_depth = std::nullopt);

// Owner and mode a state wants of a path, as given (user and group may be
// names or ids; null: not managed).
struct wanted_perms {
  nlohmann::ordered_json user;
  nlohmann::ordered_json group;
  std::optional<std::string> mode;  // normalized
};

// Salt's _check_user: "User X is not available " / "Group Y is not
// available" for those that do not exist; "" when all do (or under test,
// where Salt only logs it).
std::string check_user(const wanted_perms& want, bool test);

// Salt's _check_dir_meta: what would change on `path` ({"directory": "new"}
// when it does not exist; else "user", "group", "mode" that differ).
nlohmann::ordered_json dir_meta_changes(const std::string& path, const wanted_perms& want,
                                        bool follow_symlinks);

// Salt's file.check_perms on `path` (which exists): sets owner and mode
// where they differ (not under test) and records into `changes` "user",
// "group" and "mode" as Salt does (under test: what differs); what failed
// goes to `errors` ("Failed to change mode to 0755").
void check_perms(const std::string& path, const wanted_perms& want, bool test,
                 bool follow_symlinks, nlohmann::ordered_json& changes,
                 std::vector<std::string>& errors);

// Salt's _clean_dir: removes (not under test) what is below `root` but
// neither in `keep` nor a parent of something in it, nor spared by
// exclude_pat; answers what went (or would go), top-down.
std::vector<std::string> clean_tree(const std::string& root, const std::set<std::string>& keep,
                                    const nlohmann::ordered_json* exclude_pat, bool test);

// os.path.join(a, b) for a relative b.
std::string path_join(const std::string& a, const std::string& b);

}  // namespace brine::states
