#include "master/acl.h"

#include <fnmatch.h>

#include "base/error.h"

namespace brine::master {

namespace {

bool glob(const std::string& pattern, const std::string& text) {
  return ::fnmatch(pattern.c_str(), text.c_str(), FNM_NOESCAPE) == 0;
}

std::string text_of(const nlohmann::json& v, const std::string& where) {
  if (!v.is_string() || v.get_ref<const std::string&>().empty()) {
    throw base::error("publisher_acl: " + where + " must be a function glob, got " + v.dump());
  }
  return v.get<std::string>();
}

}  // namespace

publisher_acl::publisher_acl(const nlohmann::json& config) {
  if (config.is_null()) return;
  if (!config.is_object()) {
    throw base::error("publisher_acl must map user names to lists of function globs");
  }
  for (const auto& [user, entries] : config.items()) {
    std::string where = "user '" + user + "'";
    if (!entries.is_array()) {
      throw base::error("publisher_acl: " + where + " needs a list of function globs (or of "
                        "{minion glob: [function globs]}), got " +
                        entries.dump());
    }
    for (const auto& e : entries) {
      if (e.is_object()) {
        for (const auto& [target, funs] : e.items()) {
          std::string w = where + " minions '" + target + "'";
          if (!funs.is_array()) {
            throw base::error("publisher_acl: " + w + " needs a list of function globs, got " +
                              funs.dump());
          }
          for (const auto& f : funs) rules_.push_back({user, text_of(f, w), target});
        }
      } else {
        rules_.push_back({user, text_of(e, where), std::nullopt});
      }
    }
  }
}

std::string publisher_acl::refusal(const std::string& user, const std::string& fun,
                                   const std::vector<std::string>& minions) const {
  bool user_known = false;
  std::vector<bool> allowed(minions.size(), false);
  size_t allowed_count = 0;
  for (const auto& r : rules_) {
    if (!glob(r.user_glob, user)) continue;
    user_known = true;
    if (!glob(r.fun_glob, fun)) continue;
    if (!r.target_glob) return {};
    for (size_t i = 0; i < minions.size(); ++i) {
      if (!allowed[i] && glob(*r.target_glob, minions[i])) {
        allowed[i] = true;
        ++allowed_count;
      }
    }
  }
  if (!user_known) {
    return "user " + user + " is not in the master's publisher_acl; ask its administrator";
  }
  if (allowed_count == minions.size() && !minions.empty()) return {};
  for (size_t i = 0; i < minions.size(); ++i) {
    if (!allowed[i]) {
      return "publisher_acl does not allow user " + user + " to run " + fun + " on minion " +
             minions[i];
    }
  }
  return "publisher_acl does not allow user " + user + " to run " + fun;
}

}  // namespace brine::master
