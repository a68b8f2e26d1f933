// The apt one-line sources parser against the lines Salt's aptpkg fallback
// (SourceEntry without python3-apt) reads and writes.

#include "modules/apt_sources.h"

#include <gtest/gtest.h>

namespace brine::modules::apt {
namespace {

TEST(apt_sources, a_plain_line) {
  source_entry e = parse_line("deb http://deb.debian.org/debian bookworm main contrib", "/f");
  EXPECT_FALSE(e.invalid);
  EXPECT_FALSE(e.disabled);
  EXPECT_EQ(e.file, "/f");
  EXPECT_EQ(e.type, "deb");
  EXPECT_EQ(e.uri, "http://deb.debian.org/debian");
  EXPECT_EQ(e.dist, "bookworm");
  EXPECT_EQ(e.comps, (std::vector<std::string>{"main", "contrib"}));
  EXPECT_TRUE(e.architectures.empty());
  EXPECT_EQ(e.render(), "deb http://deb.debian.org/debian bookworm main contrib");
}

TEST(apt_sources, options_comment_and_disabled) {
  source_entry e = parse_line(
      "#deb [signed-by=/etc/apt/keyrings/k.gpg arch=amd64,i386 trusted=yes] https://x.invalid/r/ "
      "stable main #my repo");
  EXPECT_FALSE(e.invalid);
  EXPECT_TRUE(e.disabled);
  EXPECT_EQ(e.comment, "my repo");
  EXPECT_EQ(e.uri, "https://x.invalid/r/");
  EXPECT_EQ(e.dist, "stable");
  EXPECT_EQ(e.comps, std::vector<std::string>{"main"});
  EXPECT_EQ(e.architectures, (std::vector<std::string>{"amd64", "i386"}));
  EXPECT_EQ(e.signedby, "/etc/apt/keyrings/k.gpg");
  ASSERT_EQ(e.options.size(), 3u);
  EXPECT_EQ(e.options[2].full, "trusted=yes");
  // Salt's repo_line: "#" as a word, options in the line's order.
  EXPECT_EQ(e.render(),
            "# deb [signed-by=/etc/apt/keyrings/k.gpg arch=amd64,i386 trusted=yes] "
            "https://x.invalid/r/ stable main #my repo");
  e.architectures = {"arm64"};
  e.disabled = false;
  e.comment.clear();
  EXPECT_EQ(e.render(),
            "deb [signed-by=/etc/apt/keyrings/k.gpg arch=arm64 trusted=yes] https://x.invalid/r/ "
            "stable main");
}

TEST(apt_sources, a_flat_repository_keeps_salts_trailing_space) {
  source_entry e = parse_line("deb [trusted=yes] file:/srv/repo ./");
  EXPECT_FALSE(e.invalid);
  EXPECT_EQ(e.uri, "file:/srv/repo");
  EXPECT_EQ(e.dist, "./");
  EXPECT_TRUE(e.comps.empty());
  EXPECT_EQ(e.render(), "deb [trusted=yes] file:/srv/repo ./ ");
}

TEST(apt_sources, what_is_not_a_source_is_invalid_and_kept) {
  for (const char* line : {"", "   ", "# a comment", "deb http://x", "foo http://x y z",
                           "deb [arch=amd64 http://x y z", "##deb http://x y z"}) {
    source_entry e = parse_line(line);
    EXPECT_TRUE(e.invalid) << line;
    EXPECT_EQ(e.render(), line);
  }
  // A leading "[" option without "=" is still cut off (Salt strips the brackets).
  EXPECT_FALSE(parse_line("deb [ arch=arm64 ] http://x y z").invalid);
  EXPECT_EQ(parse_line("deb [ arch=arm64 ] http://x y z").uri, "http://x");
}

TEST(apt_sources, a_file_keeps_every_line) {
  auto entries = parse_file("# head\ndeb http://a b c\n\ndeb-src http://a b c\n", "/l");
  ASSERT_EQ(entries.size(), 4u);
  EXPECT_TRUE(entries[0].invalid);
  EXPECT_EQ(entries[1].type, "deb");
  EXPECT_TRUE(entries[2].invalid);
  EXPECT_EQ(entries[3].type, "deb-src");
  EXPECT_EQ(entries[3].file, "/l");
}

TEST(apt_sources, helpers) {
  EXPECT_EQ(split_list(" a, b,,c "), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(strip_uri("deb  http://x/y// z main"), "deb http://x/y z main");
  EXPECT_EQ(strip_uri("deb file:/x/ z"), "deb file:/x/ z");
}

}  // namespace
}  // namespace brine::modules::apt
