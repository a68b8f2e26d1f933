#include "base/python.h"

#include <gtest/gtest.h>

namespace brine::base {
namespace {

// Expected values are Python 3's repr() of the same str.
TEST(python_repr, quotes_and_escapes_as_python) {
  EXPECT_EQ(python_repr(""), "''");
  EXPECT_EQ(python_repr("web1"), "'web1'");
  EXPECT_EQ(python_repr("it's"), "\"it's\"");
  EXPECT_EQ(python_repr("say \"hi\""), "'say \"hi\"'");
  EXPECT_EQ(python_repr("both ' and \""), "'both \\' and \"'");
  EXPECT_EQ(python_repr("a\\b"), "'a\\\\b'");
  EXPECT_EQ(python_repr("l1\nl2\r\t"), "'l1\\nl2\\r\\t'");
  EXPECT_EQ(python_repr(std::string_view("\x01\x1f\x7f", 3)), "'\\x01\\x1f\\x7f'");
  EXPECT_EQ(python_repr("caf\xc3\xa9"), "'caf\xc3\xa9'");
  std::string out = "[";
  append_python_repr("x", out);
  EXPECT_EQ(out, "['x'");
}

}  // namespace
}  // namespace brine::base
