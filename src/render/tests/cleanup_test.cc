#include <gtest/gtest.h>

#include <string>

#include "render/render.h"

// After a render, the containers it changed into cycles are emptied (values
// have no cycle collector); the context's own data and containers that hold
// no cycle are left as they are. A host callable `keep` holds on to what a
// template gives it, so that the test can look at it after the render.
namespace brine::render {
namespace {

struct kept_values {
  std::vector<value> values;
  context ctx() {
    context c;
    c["keep"] = value::make_callable("keep", [this](call_args& a) {
      values.push_back(a.positional.at(0));
      return value();
    });
    return c;
  }
};

TEST(Cleanup, AListThatHoldsItselfIsEmptied) {
  kept_values k;
  EXPECT_EQ(render("{% set l = [1] %}{% do l.append(l) %}{{ l }}{% do keep(l) %}", "t", k.ctx()),
            "[1, [...]]");
  ASSERT_EQ(k.values.size(), 1U);
  EXPECT_TRUE(k.values[0].items().empty());
}

TEST(Cleanup, ACycleThroughDictsIsEmptied) {
  kept_values k;
  render(
      "{% set a = {} %}{% set b = {'a': a} %}{% do a.update({'b': [b]}) %}{% do keep(a) %}"
      "{% do keep(b) %}",
      "t", k.ctx());
  ASSERT_EQ(k.values.size(), 2U);
  EXPECT_TRUE(k.values[0].dict().entries.empty());
}

TEST(Cleanup, ACycleThroughABoundMethodIsEmptied) {
  kept_values k;
  render("{% set l = [] %}{% do l.append(l.append) %}{% do keep(l) %}", "t", k.ctx());
  ASSERT_EQ(k.values.size(), 1U);
  EXPECT_TRUE(k.values[0].items().empty());
}

TEST(Cleanup, ContainersWithoutACycleAreLeftAsTheyAre) {
  kept_values k;
  render(
      "{% set l = [1] %}{% do l.append(2) %}{% set d = {'x': l} %}{% do d.update({'y': [l]}) %}"
      "{% do keep(l) %}{% do keep(d) %}",
      "t", k.ctx());
  ASSERT_EQ(k.values.size(), 2U);
  EXPECT_EQ(k.values[0].repr(), "[1, 2]");
  EXPECT_EQ(k.values[1].repr(), "{'x': [1, 2], 'y': [[1, 2]]}");
}

TEST(Cleanup, TheContextsDataIsKeptEvenInACycle) {
  kept_values k;
  context c = k.ctx();
  value d = value::make_dict();
  c["d"] = d;
  render("{% do d.update({'self': d}) %}{% set l = [] %}{% do l.append(l) %}", "t", c);
  ASSERT_EQ(d.dict().entries.size(), 1U);
  d.dict().entries.clear();  // no cycle collector: break it by hand
}

}  // namespace
}  // namespace brine::render
