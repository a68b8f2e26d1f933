#include "master/event_bus.h"

#include <algorithm>

namespace brine::master {

uint64_t event_bus::subscribe(std::string prefix, callback cb) {
  std::lock_guard lock(mu_);
  uint64_t token = next_token_++;
  subscribers_.push_back({token, std::move(prefix), std::move(cb)});
  return token;
}

void event_bus::unsubscribe(uint64_t token) {
  std::lock_guard lock(mu_);
  std::erase_if(subscribers_, [&](const subscriber& s) { return s.token == token; });
}

void event_bus::publish(const std::string& tag, const nlohmann::json& data) {
  std::lock_guard lock(mu_);
  for (const auto& s : subscribers_) {
    if (tag.compare(0, s.prefix.size(), s.prefix) == 0) s.cb(tag, data);
  }
}

bool event_bus::wanted(const std::string& tag) {
  std::lock_guard lock(mu_);
  return std::any_of(subscribers_.begin(), subscribers_.end(), [&](const subscriber& s) {
    return tag.compare(0, s.prefix.size(), s.prefix) == 0;
  });
}

}  // namespace brine::master
