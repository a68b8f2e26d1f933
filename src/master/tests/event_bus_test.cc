#include "master/event_bus.h"

#include <gtest/gtest.h>

namespace brine::master {
namespace {

TEST(event_bus, prefix_subscription_and_unsubscribe) {
  event_bus bus;
  std::vector<std::string> got;
  auto t = bus.subscribe("brine/job/1/", [&](const std::string& tag, const nlohmann::json&) {
    got.push_back(tag);
  });
  bus.publish("brine/job/1/ret/m1", {});
  bus.publish("brine/job/2/ret/m1", {});
  bus.publish("brine/auth", {});
  bus.unsubscribe(t);
  bus.publish("brine/job/1/ret/m2", {});
  EXPECT_EQ(got, std::vector<std::string>{"brine/job/1/ret/m1"});
}

}  // namespace
}  // namespace brine::master
