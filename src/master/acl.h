#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace brine::master {

// Salt's publisher_acl: which functions a local user who is neither root nor
// the master's own user may publish, optionally only to minions matching a
// glob:
//   publisher_acl:
//     fred: [test.ping, 'pkg.*']
//     'dev*':                       # user names are globs too
//       - 'web*': ['test.*', cmd.run]
class publisher_acl {
 public:
  // Throws base::error naming the bad entry.
  explicit publisher_acl(const nlohmann::json& config);

  bool empty() const { return rules_.empty(); }

  // Empty when `user` may run `fun` on every one of `minions`; else why not.
  std::string refusal(const std::string& user, const std::string& fun,
                      const std::vector<std::string>& minions) const;

 private:
  struct rule {
    std::string user_glob;
    std::string fun_glob;
    std::optional<std::string> target_glob;  // none: any minion
  };
  std::vector<rule> rules_;
};

}  // namespace brine::master
