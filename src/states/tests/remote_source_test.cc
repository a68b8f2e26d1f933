// file.managed, file.cached, file.not_cached and archive.extracted with
// http sources, fetched from a server on loopback as Salt fetches them:
// into the minion's extrn_files cache, checked against source_hash.

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>

#include "http/server.h"
#include "modules/digest.h"
#include "state_fixture.h"

namespace brine::states {
namespace {

namespace fs = std::filesystem;

std::string sha256_of(const std::string& text) {
  modules::digester d("sha256");
  d.update(text.data(), text.size());
  return d.hex();
}

class remote_source_test : public state_fixture {
 protected:
  remote_source_test()
      : web_("127.0.0.1", 0,
             [this](const http::request& r) {
               std::lock_guard lock(mutex_);
               ++requests_[std::string(r.method) + " " + std::string(r.path)];
               auto f = files_.find(std::string(r.path));
               if (f == files_.end()) return http::response{404, "text/plain", "not here\n"};
               return http::response{200, "application/octet-stream", f->second};
             },
             "fix") {
    minion_.opts_["cachedir"] = dir_.file("cache");
    minion_.opts_["file_roots"] = {{"base", {dir_.file("roots")}}};
    context_ = &minion_;
    base_ = "http://127.0.0.1:" + std::to_string(web_.port());
    serve("/motd", "hello from the web\n");
    serve("/SHA256SUMS", std::string(64, 'a') + "  other\n" + sha256_of("hello from the web\n") +
                             "  motd\n");
  }
  void serve(const std::string& path, const std::string& body) {
    std::lock_guard lock(mutex_);
    files_[path] = body;
  }
  int requests(const std::string& what) {
    std::lock_guard lock(mutex_);
    return requests_[what];
  }
  std::string cached(const std::string& path) const {
    return dir_.file("cache") + "/extrn_files/base/127.0.0.1" + std::to_string(web_.port()) + path;
  }

  std::mutex mutex_;
  std::map<std::string, std::string> files_;
  std::map<std::string, int> requests_;
  http::server web_;
  std::string base_;
};

TEST_F(remote_source_test, managed_fetches_checks_the_hash_and_then_leaves_the_file_alone) {
  std::string dest = path("motd");
  std::string hash = "sha256=" + sha256_of("hello from the web\n");
  json low = {{"name", dest}, {"source", base_ + "/motd"}, {"source_hash", hash}};
  json r = call("file.managed", low, true);
  EXPECT_EQ(r["result"], nullptr) << r;
  EXPECT_EQ(r["changes"]["newfile"], dest);
  EXPECT_FALSE(fs::exists(dest));
  r = call("file.managed", low);
  EXPECT_EQ(r["result"], true) << r;
  EXPECT_EQ(r["changes"]["diff"], "New file");
  EXPECT_EQ(read("motd"), "hello from the web\n");
  EXPECT_EQ(get(cached("/motd")), "hello from the web\n");
  int fetched = requests("GET /motd");
  EXPECT_GE(fetched, 1);
  // The file has the declared hash: nothing is fetched again.
  r = call("file.managed", low);
  EXPECT_EQ(r["result"], true) << r;
  EXPECT_EQ(r["comment"], "File " + dest + " is in the correct state");
  EXPECT_EQ(requests("GET /motd"), fetched);
}

TEST_F(remote_source_test, managed_takes_the_hash_from_a_hash_file) {
  std::string dest = path("motd");
  json low = {{"name", dest}, {"source", base_ + "/motd"}, {"source_hash", base_ + "/SHA256SUMS"}};
  json r = call("file.managed", low);
  EXPECT_EQ(r["result"], true) << r;
  EXPECT_EQ(read("motd"), "hello from the web\n");
  // source_hash_name picks another line: its hash does not match.
  std::remove(dest.c_str());
  low["source_hash_name"] = "other";
  r = call("file.managed", low);
  EXPECT_EQ(r["result"], false) << r;
  EXPECT_EQ(r["comment"], "Specified sha256 checksum for " + base_ + "/motd (" + std::string(64, 'a') +
                              ") does not match actual checksum (" + sha256_of("hello from the web\n") +
                              "). If the 'source_hash' value refers to a remote file with multiple "
                              "possible matches, then it may be necessary to set 'source_hash_name'.");
  EXPECT_FALSE(fs::exists(dest));
}

TEST_F(remote_source_test, managed_says_what_is_wrong_as_salt_does) {
  std::string dest = path("motd");
  json r = call("file.managed", {{"name", dest}, {"source", base_ + "/motd"}});
  EXPECT_EQ(r["result"], false);
  EXPECT_EQ(r["comment"], "Unable to verify upstream hash of source file " + base_ +
                              "/motd, please set source_hash or set skip_verify to True");
  r = call("file.managed", {{"name", dest}, {"source", base_ + "/gone"}, {"skip_verify", true}});
  EXPECT_EQ(r["result"], false);
  EXPECT_EQ(r["comment"], "Failed to cache " + base_ + "/gone: Error: HTTP 404: Not Found reading /gone");
  r = call("file.managed", {{"name", dest}, {"source", base_ + "/motd"}, {"source_hash", "sha256=bad"}});
  EXPECT_EQ(r["result"], false);
  EXPECT_EQ(r["comment"].get<std::string>().rfind("Source hash sha256=bad format is invalid.", 0), 0u) << r;
  EXPECT_FALSE(fs::exists(dest));
  // skip_verify: fetched without a hash.
  r = call("file.managed", {{"name", dest}, {"source", base_ + "/motd"}, {"skip_verify", true}});
  EXPECT_EQ(r["result"], true) << r;
  EXPECT_EQ(read("motd"), "hello from the web\n");
}

TEST_F(remote_source_test, a_source_list_takes_the_first_url_that_answers) {
  std::string dest = path("motd");
  json low = {{"name", dest},
              {"source", json::array({base_ + "/gone", json{{base_ + "/motd", sha256_of("hello from the web\n")}}})}};
  json r = call("file.managed", low);
  EXPECT_EQ(r["result"], true) << r;
  EXPECT_EQ(read("motd"), "hello from the web\n");
  EXPECT_EQ(requests("HEAD /gone"), 1);
  EXPECT_EQ(requests("GET /gone"), 0);
  low["source"] = json::array({base_ + "/gone", base_ + "/also-gone"});
  r = call("file.managed", low);
  EXPECT_EQ(r["result"], false);
  EXPECT_EQ(r["comment"], "none of the specified sources were found");
}

TEST_F(remote_source_test, cached_and_not_cached) {
  std::string url = base_ + "/motd";
  std::string hash = sha256_of("hello from the web\n");
  json r = call("file.cached", {{"name", url}, {"source_hash", hash}}, true);
  EXPECT_EQ(r["result"], nullptr);
  EXPECT_EQ(r["comment"], "File will be cached: " + url);
  r = call("file.cached", {{"name", url}, {"source_hash", hash}});
  EXPECT_EQ(r["result"], true) << r;
  EXPECT_EQ(r["comment"], "File is already cached to " + cached("/motd") + " with hash " + hash);
  EXPECT_EQ(r["changes"]["hash"], (json{{"old", nullptr}, {"new", hash}}));
  r = call("file.cached", {{"name", url}, {"source_hash", hash}}, true);
  EXPECT_EQ(r["comment"], "File already cached: " + url);
  r = call("file.cached", {{"name", url}});
  EXPECT_EQ(r["result"], false);
  EXPECT_EQ(r["comment"], "Unable to verify upstream hash of source file " + url +
                              ", please set source_hash or set skip_verify or use_etag to True");
  r = call("file.not_cached", {{"name", url}});
  EXPECT_EQ(r["result"], true);
  EXPECT_EQ(r["comment"], cached("/motd") + " was deleted");
  EXPECT_FALSE(fs::exists(cached("/motd")));
  r = call("file.not_cached", {{"name", url}});
  EXPECT_EQ(r["comment"], url + " is not cached");
  std::string local = path("here");
  write("here", "x");
  r = call("file.cached", {{"name", local}});
  EXPECT_EQ(r["result"], true);
  EXPECT_EQ(r["comment"], "File " + local + " is present on the minion");
}

TEST_F(remote_source_test, archive_extracted_caches_a_url_through_file_cached) {
  if (!have_tool("tar") || !have_tool("gzip")) GTEST_SKIP() << "needs tar and gzip";
  put(path("src/app/bin/run"), "#!/bin/sh\n");
  ASSERT_EQ(std::system(("tar -C " + path("src") + " -czf " + path("app.tar.gz") + " app").c_str()), 0);
  std::string bytes = get(path("app.tar.gz"));
  serve("/dl/app.tar.gz", bytes);
  std::string url = base_ + "/dl/app.tar.gz?version=1";
  json low = {{"name", path("opt")}, {"source", url}, {"source_hash", "sha256=" + sha256_of(bytes)}};
  json r = call("archive.extracted", low, true);
  EXPECT_EQ(r["result"], nullptr);
  EXPECT_EQ(r["comment"], "Archive " + url +
                              " would be cached (if necessary) and checked to discover if extraction "
                              "is needed");
  r = call("archive.extracted", low);
  EXPECT_EQ(r["result"], true) << r;
  EXPECT_EQ(read("opt/app/bin/run"), "#!/bin/sh\n");
  EXPECT_TRUE(fs::exists(cached("/dl/app.tar.gz-version=1")));
  // A wrong hash: file.cached's answer is the state's.
  low["name"] = path("opt2");
  low["source_hash"] = "sha256=" + std::string(64, 'b');
  r = call("archive.extracted", low);
  EXPECT_EQ(r["result"], false);
  EXPECT_EQ(r["comment"], "File is cached to " + cached("/dl/app.tar.gz-version=1") + ", but the hash (" +
                              sha256_of(bytes) + ") does not match the specified hash (" +
                              std::string(64, 'b') + ")");
}

}  // namespace
}  // namespace brine::states
