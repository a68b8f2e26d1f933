#pragma once

#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace brine::minion {

// Returns not yet acknowledged by a master, one file per job in
// `<cachedir>/returns/<jid>.ret` (MessagePack). A return stays until a master
// says it is stored, and is sent again after every reconnect, so a master's
// death or a dropped connection loses nothing.
//
// Threading: methods are safe from any thread; save() does blocking I/O
// (write + fsync + rename) and belongs off the I/O threads.
class spool {
 public:
  explicit spool(std::string dir);

  void save(const std::string& jid, const nlohmann::json& ret);
  void forget(const std::string& jid);
  bool contains(const std::string& jid) const;
  // Every spooled return, oldest jid first.
  std::vector<nlohmann::json> load_all() const;

 private:
  std::string path(const std::string& jid) const;

  std::string dir_;
  mutable std::mutex mu_;
  std::set<std::string> jids_;
};

}  // namespace brine::minion
