// Tests of the source hash helpers (Salt's source_sum, extract_hash) and of
// the cache of remote sources, fetched from a server on loopback.

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "http/server.h"
#include "modules/digest.h"
#include "modules/source_sum.h"
#include "modules/url_cache.h"
#include "test_util.h"

namespace brine::modules {
namespace {

using nlohmann::json;
using testing::run_sync;

const std::string k_md5 = "d41d8cd98f00b204e9800998ecf8427e";
const std::string k_sha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const base::error& e) {
    return e.what();
  }
  return "";
}

TEST(source_sum, a_hash_expression_is_a_type_and_a_digest) {
  source_sum s = parse_hash_expression("sha256=" + k_sha256);
  EXPECT_EQ(s.hash_type, "sha256");
  EXPECT_EQ(s.hsum, k_sha256);
  s = parse_hash_expression("D41D8CD98F00B204E9800998ECF8427E");
  EXPECT_EQ(s.hash_type, "md5");
  EXPECT_EQ(s.hsum, k_md5);
}

TEST(source_sum, a_bad_expression_gets_salts_message) {
  EXPECT_EQ(message_of([] { parse_hash_expression("nothex"); }).rfind("Source hash nothex format is invalid. The supported formats are: 1) a hash", 0), 0u);
  EXPECT_EQ(message_of([] { parse_hash_expression("sha999=" + k_md5); }),
            "Invalid hash type 'sha999'. Supported hash types are: sha512, sha384, sha256, "
            "sha224, sha1, md5. Either remove the hash type and simply use '" + k_md5 +
                "' as the source_hash, or change the hash type to a supported type.");
  EXPECT_EQ(message_of([] { parse_hash_expression("sha256=" + k_md5); }),
            "Invalid length (32) for hash type 'sha256'. Either remove the hash type and simply "
            "use '" + k_md5 + "' as the source_hash, or change the hash type to 'md5'");
}

TEST(source_sum, extract_hash_prefers_the_hash_name_then_the_file_then_the_source) {
  std::string a(64, 'a'), b(64, 'b'), c(64, 'c'), d(64, 'd');
  std::string text = a + "  other.tar.gz\n" + b + "  node_exporter.tar.gz\n" + c +
                     " *dest.bin\n" + d + "  chosen\n";
  auto by_name = extract_hash(text, "", "/opt/dest.bin",
                              "https://example.org/dl/node_exporter.tar.gz", "chosen");
  ASSERT_TRUE(by_name);
  EXPECT_EQ(by_name->hsum, d);
  auto by_file = extract_hash(text, "", "/opt/dest.bin", "https://example.org/dl/node_exporter.tar.gz", "");
  ASSERT_TRUE(by_file);
  EXPECT_EQ(by_file->hsum, c);
  auto by_source = extract_hash(text, "", "/opt/x", "https://example.org/dl/node_exporter.tar.gz", "");
  ASSERT_TRUE(by_source);
  EXPECT_EQ(by_source->hsum, b);
  auto first = extract_hash(text, "sha256", "/opt/x", "https://example.org/y", "");
  ASSERT_TRUE(first);
  EXPECT_EQ(first->hsum, a);
  EXPECT_EQ(first->hash_type, "sha256");
  // Only an md5 is wanted: the sha256 lines hold none.
  EXPECT_FALSE(extract_hash(text, "md5", "/opt/x", "", ""));
  EXPECT_FALSE(extract_hash("no hashes here\n", "", "/opt/x", "", ""));
}

TEST(url_cache, the_path_is_salts_extrn_path) {
  EXPECT_EQ(extrn_path("/var/cache/brine", "base", "https://u:pw@example.org:8080/a/b.tar.gz?x=1"),
            "/var/cache/brine/extrn_files/base/example.org8080/a/b.tar.gz-x=1");
  EXPECT_EQ(extrn_path("/c", "prod", "ftp://mirror/pub/f"), "/c/extrn_files/prod/mirror/pub/f");
  EXPECT_THROW(extrn_path("/c", "base", "http://h/../../etc/passwd"), base::error);
  EXPECT_TRUE(is_remote_url("http://h/x"));
  EXPECT_TRUE(is_remote_url("ftp://h/x"));
  EXPECT_FALSE(is_remote_url("salt://x"));
}

// A port on loopback nothing listens on: bound, then closed.
uint16_t unused_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

class url_cache_served : public ::testing::Test {
 protected:
  url_cache_served()
      : server_("127.0.0.1", 0,
                [this](const http::request& r) {
                  ++calls_;
                  if (r.path == "/empty") return http::response{200, "application/octet-stream", ""};
                  return http::response{404, "text/plain", "not here\n"};
                },
                "fix") {
    opts_ = {{"cachedir", dir_.path()}};
    base_ = "http://127.0.0.1:" + std::to_string(server_.port());
  }
  testing::temp_dir dir_;
  std::atomic<int> calls_{0};
  http::server server_;
  json opts_;
  std::string base_;
};

TEST_F(url_cache_served, fetches_once_and_reuses_a_copy_with_the_wanted_hash) {
  std::string got = run_sync(cache_url(opts_, base_ + "/empty", "base", "", true));
  EXPECT_EQ(got, extrn_path(dir_.path(), "base", base_ + "/empty"));
  EXPECT_TRUE(std::filesystem::is_regular_file(got));
  EXPECT_EQ(cached_url(opts_, "base", base_ + "/empty"), got);
  EXPECT_EQ(calls_, 1);
  // The copy has the digest asked for: no second request.
  EXPECT_EQ(run_sync(cache_url(opts_, base_ + "/empty", "base", "md5=" + k_md5, true)), got);
  EXPECT_EQ(calls_, 1);
  // Another digest: fetched anew.
  run_sync(cache_url(opts_, base_ + "/empty", "base", std::string(32, '0'), true));
  EXPECT_EQ(calls_, 2);
  EXPECT_EQ(file_digest(got, "sha256"), k_sha256);
  EXPECT_EQ(run_sync(url_answers(base_ + "/empty", true)), "");
  EXPECT_EQ(run_sync(url_answers(base_ + "/missing", true)), "HTTP 404: Not Found");
}

TEST_F(url_cache_served, errors_are_salts_and_leave_nothing_behind) {
  EXPECT_EQ(message_of([&] { run_sync(cache_url(opts_, base_ + "/missing", "base", "", true)); }),
            "Error: HTTP 404: Not Found reading /missing");
  EXPECT_EQ(cached_url(opts_, "base", base_ + "/missing"), "");
  std::string refused = "http://127.0.0.1:" + std::to_string(unused_port()) + "/x.tar.gz";
  EXPECT_EQ(message_of([&] { run_sync(cache_url(opts_, refused, "base", "", true)); }),
            "Error: [Errno 111] Connection refused reading /x.tar.gz");
  // No part file is left in the cache.
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir_.path())) {
    EXPECT_FALSE(e.is_regular_file()) << e.path();
  }
  EXPECT_EQ(message_of([&] { run_sync(cache_url(json::object(), base_ + "/empty", "base", "", true)); }),
            "cannot cache " + base_ + "/empty: the minion has no cachedir; set cachedir in its configuration");
}

}  // namespace
}  // namespace brine::modules
