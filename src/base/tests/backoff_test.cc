#include "base/backoff.h"

#include <gtest/gtest.h>

namespace brine::base {
namespace {

using std::chrono::milliseconds;

TEST(Backoff, DoublesToTheCapWithJitterInTheUpperHalf) {
  backoff b(milliseconds(1000), milliseconds(60000));
  const int64_t expected[] = {1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000, 60000};
  bool varied = false;
  for (int64_t d : expected) {
    auto w = b.next().count();
    EXPECT_GE(w, d / 2) << d;
    EXPECT_LE(w, d) << d;
    varied = varied || w != d;
  }
  EXPECT_EQ(b.tries(), 9u);
  // Nine draws from ranges of 500+ values: all at the top would be a stub.
  EXPECT_TRUE(varied);
  b.reset();
  EXPECT_EQ(b.tries(), 0u);
  EXPECT_LE(b.next().count(), 1000);
}

TEST(Backoff, TwoRetriersDoNotMarchInStep) {
  backoff a(milliseconds(60000), milliseconds(60000));
  backoff b(milliseconds(60000), milliseconds(60000));
  int same = 0;
  for (int i = 0; i < 10; ++i) same += a.next() == b.next() ? 1 : 0;
  EXPECT_LT(same, 10);
}

}  // namespace
}  // namespace brine::base
