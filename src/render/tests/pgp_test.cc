// render::decrypt_pgp: where Salt's gpg renderer finds blocks and what it
// does around them, with a stand-in for gpg (state/tests/gpg_test.cc runs
// the real one).

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "render/pgp.h"

namespace brine::render {
namespace {

const std::string k_block =
    "-----BEGIN PGP MESSAGE-----\n\nhQEMA\n=abcd\n-----END PGP MESSAGE-----";

// "clear(N)" for the Nth block it is given; records what it was given.
struct fake {
  std::vector<std::string> seen;
  pgp_decryptor fn() {
    return [this](const std::string& block) {
      seen.push_back(block);
      return "clear" + std::to_string(seen.size()) + "\n";
    };
  }
};

TEST(pgp, a_block_is_replaced_and_trailing_newlines_dropped) {
  fake f;
  EXPECT_EQ(decrypt_pgp_text(k_block + "\n", f.fn()), "clear1");
  EXPECT_EQ(f.seen, std::vector<std::string>{k_block});
}

TEST(pgp, text_around_blocks_stays_and_each_block_is_decrypted) {
  fake f;
  EXPECT_EQ(decrypt_pgp_text("a=" + k_block + " b=" + k_block + "\n\n", f.fn()),
            "a=clear1\n b=clear2");
}

TEST(pgp, text_without_a_block_is_untouched) {
  fake f;
  EXPECT_EQ(decrypt_pgp_text("plain\n\n", f.fn()), "plain\n\n");
  // A BEGIN without an END is no block (the pattern needs both).
  EXPECT_EQ(decrypt_pgp_text("-----BEGIN PGP MESSAGE-----\nx\n", f.fn()),
            "-----BEGIN PGP MESSAGE-----\nx\n");
  EXPECT_TRUE(f.seen.empty());
}

TEST(pgp, literal_backslash_n_in_a_block_is_a_newline) {
  fake f;
  std::string one_line = "-----BEGIN PGP MESSAGE-----\\n\\nhQEMA\\n-----END PGP MESSAGE-----";
  decrypt_pgp_text(one_line, f.fn());
  EXPECT_EQ(f.seen.at(0), "-----BEGIN PGP MESSAGE-----\n\nhQEMA\n-----END PGP MESSAGE-----");
}

TEST(pgp, data_values_at_any_depth_not_keys) {
  fake f;
  nlohmann::ordered_json data = {{"db", {{"password", k_block}, {"port", 5432}}},
                                 {"list", {k_block, "plain", true}},
                                 {k_block, "key stays"}};
  decrypt_pgp(data, f.fn());
  EXPECT_EQ(data["db"]["password"], "clear1");
  EXPECT_EQ(data["db"]["port"], 5432);
  EXPECT_EQ(data["list"], nlohmann::ordered_json({"clear2", "plain", true}));
  EXPECT_EQ(data[k_block], "key stays");
  EXPECT_EQ(f.seen.size(), 2u);
}

}  // namespace
}  // namespace brine::render
