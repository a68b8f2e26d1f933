#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace brine::master {

// The master's tagged events (brine/auth, brine/key, brine/minion/<id>/start,
// brine/job/<jid>/new, brine/job/<jid>/ret/<id>). Subscribers give a tag
// prefix; callbacks run synchronously on the publishing thread and must only
// queue work (send a frame, post a task).
//
// Threading: all methods are safe from any thread.
class event_bus {
 public:
  using callback = std::function<void(const std::string& tag, const nlohmann::json& data)>;

  uint64_t subscribe(std::string prefix, callback cb);
  void unsubscribe(uint64_t token);
  void publish(const std::string& tag, const nlohmann::json& data);
  // Whether an event with this tag would reach any subscriber (to skip
  // building one nobody hears).
  bool wanted(const std::string& tag);

 private:
  struct subscriber {
    uint64_t token;
    std::string prefix;
    callback cb;
  };
  std::mutex mu_;
  uint64_t next_token_ = 1;
  std::vector<subscriber> subscribers_;
};

}  // namespace brine::master
