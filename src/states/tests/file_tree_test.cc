// file.recurse, file.directory and file.accumulated, called as the runner
// calls them, against a temporary file server root and sandbox.

#include "states/file_tree.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "fileserver/client.h"
#include "states/tests/state_fixture.h"

namespace brine::states {
namespace {

namespace fs = std::filesystem;

// The local file client, counting the files states ask it to cache (what
// a remote client would fetch when its cache lacks them).
class counting_client : public fileserver::local_client {
 public:
  using local_client::local_client;
  asio::awaitable<std::vector<fileserver::cached_file>> cache(std::string saltenv,
                                                              std::vector<std::string> paths) override {
    asked += paths.size();
    ++calls;
    auto out = co_await local_client::cache(std::move(saltenv), std::move(paths));
    co_return out;
  }
  size_t asked = 0;
  size_t calls = 0;
};

class file_tree_test : public state_fixture {
 protected:
  file_tree_test() : state_fixture("brine-file-tree") {
    fs::create_directories(root_);
    fs::create_directories(sandbox_);
    minion_.files_ = &client_;
    context_ = &minion_;
    per_run_ = &run_;
  }

  static std::string mode_of(const std::string& path) {
    struct stat st {};
    ::stat(path.c_str(), &st);
    char buf[8];
    std::snprintf(buf, sizeof buf, "%04o", st.st_mode & 07777);
    return buf;
  }

  std::string root_ = dir_.file("roots");
  std::string sandbox_ = dir_.file("sandbox");
  counting_client client_{std::map<std::string, std::vector<std::string>>{{"base", {root_}}}};
};

TEST_F(file_tree_test, recurse_copies_the_directory_then_is_in_the_correct_state) {
  put(root_ + "/src/a.txt", "alpha\n");
  put(root_ + "/src/sub/b.txt", "beta\n");
  put(root_ + "/src/skip.bak", "bak\n");
  fs::create_directories(root_ + "/src/empty");
  std::string dest = sandbox_ + "/dest";
  json low = {{"name", dest}, {"source", "salt://src"}, {"exclude_pat", "*.bak"},
              {"include_empty", true}, {"file_mode", "0640"}};
  json r = call("file.recurse", low);
  EXPECT_EQ(r["result"], true) << r.dump(2);
  EXPECT_EQ(r["comment"], "Recursively updated " + dest);
  EXPECT_EQ(get(dest + "/a.txt"), "alpha\n");
  EXPECT_EQ(get(dest + "/sub/b.txt"), "beta\n");
  EXPECT_FALSE(fs::exists(dest + "/skip.bak"));
  EXPECT_TRUE(fs::is_directory(dest + "/empty"));
  EXPECT_EQ(mode_of(dest + "/a.txt"), "0640");
  EXPECT_EQ(r["changes"][dest + "/a.txt"], json({{"diff", "New file"}, {"mode", "0640"}}));
  EXPECT_EQ(r["changes"][dest + "/sub"], json({{dest + "/sub", {{"directory", "new"}}}}));
  EXPECT_EQ(r["changes"][dest + "/empty"], json({{dest + "/empty", {{"directory", "new"}}}}));
  EXPECT_EQ(client_.asked, 2u);

  // Second run: nothing differs, nothing is fetched.
  client_.asked = 0;
  r = call("file.recurse", low);
  EXPECT_EQ(r["result"], true);
  EXPECT_EQ(r["changes"], json::object());
  EXPECT_EQ(r["comment"], "The directory " + dest + " is in the correct state");
  EXPECT_EQ(client_.asked, 0u);

  // One file changes on the server: only it is fetched.
  put(root_ + "/src/sub/b.txt", "beta 2\n");
  r = call("file.recurse", low);
  EXPECT_EQ(client_.asked, 1u);
  EXPECT_EQ(get(dest + "/sub/b.txt"), "beta 2\n");
  EXPECT_EQ(r["changes"][dest + "/sub/b.txt"]["diff"],
            "--- \n+++ \n@@ -1 +1 @@\n-beta\n+beta 2\n");
}

TEST_F(file_tree_test, recurse_under_test_changes_nothing) {
  put(root_ + "/src/a.txt", "alpha\n");
  std::string dest = sandbox_ + "/dest";
  json r = call("file.recurse", {{"name", dest}, {"source", "salt://src"}}, true);
  EXPECT_TRUE(r["result"].is_null()) << r.dump(2);
  EXPECT_FALSE(fs::exists(dest));
  EXPECT_EQ(r["changes"][dest + "/a.txt"], json({{"newfile", dest + "/a.txt"}}));
  EXPECT_NE(r["comment"].get<std::string>().find("#### " + dest + "/a.txt ####\nThe file "),
            std::string::npos)
      << r["comment"];
}

TEST_F(file_tree_test, recurse_clean_removes_what_the_source_lacks_but_required_files) {
  put(root_ + "/src/a.txt", "alpha\n");
  std::string dest = sandbox_ + "/dest";
  put(dest + "/stale.txt", "old\n");
  put(dest + "/kept.txt", "mine\n");
  put(dest + "/old/deeper.txt", "old\n");
  json chunks = json::array({json{{"__id__", "kept"}, {"name", dest + "/kept.txt"},
                                  {"state", "file"}, {"fun", "managed"}}});
  run_.lowstate = &chunks;
  json r = call("file.recurse", {{"name", dest}, {"source", "salt://src"}, {"clean", true},
                                 {"require", json::array({json{{"file", "kept"}}})}});
  EXPECT_EQ(r["result"], true) << r.dump(2);
  EXPECT_FALSE(fs::exists(dest + "/stale.txt"));
  EXPECT_FALSE(fs::exists(dest + "/old"));
  EXPECT_TRUE(fs::exists(dest + "/kept.txt"));
  json removed = r["changes"]["removed"];
  std::sort(removed.begin(), removed.end());
  EXPECT_EQ(removed, json::array({dest + "/old", dest + "/stale.txt"}));
}

TEST_F(file_tree_test, recurse_refuses_what_salt_refuses) {
  std::string dest = sandbox_ + "/dest";
  EXPECT_EQ(call("file.recurse", {{"name", dest}, {"source", "/etc"}})["comment"],
            "Invalid source '/etc' (must be a salt:// URI)");
  EXPECT_EQ(call("file.recurse", {{"name", dest}, {"source", "salt://nope"}})["comment"],
            "Recurse failed: none of the specified sources were found");
  EXPECT_EQ(call("file.recurse", {{"name", dest}, {"source", "salt://x"}, {"mode", 644}})["comment"],
            "'mode' is not allowed in 'file.recurse'. Please use 'file_mode' and 'dir_mode'.");
}

TEST_F(file_tree_test, directory_recurse_sets_modes_and_reports_them) {
  std::string d = sandbox_ + "/d";
  put(d + "/f.txt", "f");
  fs::create_directories(d + "/sub");
  ::chmod((d + "/f.txt").c_str(), 0600);
  ::chmod((d + "/sub").c_str(), 0700);
  ::chmod(d.c_str(), 0755);
  json low = {{"name", d}, {"dir_mode", 755}, {"file_mode", 644},
              {"recurse", json::array({"mode"})}};
  json t = call("file.directory", low, true);
  EXPECT_TRUE(t["result"].is_null()) << t.dump(2);
  EXPECT_EQ(t["changes"][d + "/f.txt"], json({{"mode", "0644"}}));
  EXPECT_EQ(t["changes"][d + "/sub"], json({{"mode", "0755"}}));
  EXPECT_EQ(mode_of(d + "/f.txt"), "0600");
  json r = call("file.directory", low);
  EXPECT_EQ(r["result"], true) << r.dump(2);
  EXPECT_EQ(r["comment"], "Directory " + d + " updated");
  EXPECT_EQ(r["changes"]["mode"], "0755");
  EXPECT_EQ(mode_of(d + "/f.txt"), "0644");
  EXPECT_EQ(mode_of(d + "/sub"), "0755");
  r = call("file.directory", low);
  EXPECT_EQ(r["changes"], json::object());
  EXPECT_EQ(r["comment"], "The directory " + d + " is in the correct state");
}

TEST_F(file_tree_test, directory_clean_keeps_required_files_and_excluded_patterns) {
  std::string d = sandbox_ + "/d";
  put(d + "/a.txt", "a");
  put(d + "/b.txt", "b");
  put(d + "/app.log", "log");
  json chunks = json::array({json{{"__id__", "keep_a"}, {"name", d + "/a.txt"},
                                  {"state", "file"}, {"fun", "managed"}}});
  run_.lowstate = &chunks;
  json low = {{"name", d}, {"clean", true}, {"exclude_pat", "*.log"},
              {"require", json::array({json{{"file", "keep_a"}}})}};
  json t = call("file.directory", low, true);
  EXPECT_EQ(t["changes"], json({{d + "/b.txt", {{"removed", "Removed due to clean"}}}}));
  EXPECT_EQ(t["comment"], "The following files will be changed:\n" + d +
                              "/b.txt: removed - Removed due to clean\n");
  json r = call("file.directory", low);
  EXPECT_EQ(r["comment"], "Files cleaned from directory " + d);
  EXPECT_EQ(r["changes"]["removed"], json::array({d + "/b.txt"}));
  EXPECT_TRUE(fs::exists(d + "/a.txt"));
  EXPECT_TRUE(fs::exists(d + "/app.log"));
  EXPECT_FALSE(fs::exists(d + "/b.txt"));
}

TEST_F(file_tree_test, directory_clean_keeps_only_what_a_required_recurse_manages) {
  put(root_ + "/src/a.txt", "a\n");
  std::string d = sandbox_ + "/d";
  put(d + "/sub/a.txt", "a\n");
  put(d + "/sub/extra.txt", "not the server's\n");
  json chunks = json::array({json{{"__id__", "r"}, {"name", d + "/sub"}, {"state", "file"},
                                  {"fun", "recurse"}, {"source", "salt://src"}}});
  run_.lowstate = &chunks;
  json r = call("file.directory", {{"name", d}, {"clean", true},
                                   {"require", json::array({json{{"file", "r"}}})}});
  EXPECT_EQ(r["changes"]["removed"], json::array({d + "/sub/extra.txt"})) << r.dump(2);
  EXPECT_TRUE(fs::exists(d + "/sub/a.txt"));
}

TEST_F(file_tree_test, directory_force_and_backupname_replace_a_file) {
  std::string f = sandbox_ + "/f";
  put(f, "in the way");
  EXPECT_EQ(call("file.directory", {{"name", f}})["comment"],
            "Specified location " + f + " exists and is a file");
  json r = call("file.directory", {{"name", f}, {"backupname", f + ".bak"}});
  EXPECT_EQ(r["changes"][f], json({{"directory", "new"}})) << r.dump(2);
  EXPECT_TRUE(fs::is_directory(f));
  EXPECT_EQ(get(f + ".bak"), "in the way");
  std::string g = sandbox_ + "/g";
  put(g, "x");
  r = call("file.directory", {{"name", g}, {"force", true}});
  EXPECT_EQ(r["changes"]["forced"], "File was forcibly replaced");
  EXPECT_TRUE(fs::is_directory(g));
  EXPECT_EQ(call("file.directory", {{"name", g}, {"recurse", json::array({"owner"})}})["comment"],
            "Types for \"recurse\" limited to \"user\", \"group\", \"mode\", \"ignore_files\", "
            "\"ignore_dirs\", \"silent\".");
}

TEST_F(file_tree_test, accumulated_charges_the_run_once_per_text) {
  json low = {{"name", "acc"}, {"filename", "/x"}, {"text", json::array({"a", "b", "a"})},
              {"require_in", json::array({json{{"file", "target"}}})}, {"__sls__", "s"},
              {"__id__", "acc"}};
  json r = call("file.accumulated", low);
  EXPECT_EQ(r["comment"], "Accumulator acc for file /x was charged by text");
  EXPECT_EQ(run_.accumulators["/x"]["acc"], json::array({"a", "b"}));
  EXPECT_EQ(run_.accumulator_deps["/x"]["acc"], json::array({"target"}));
  r = call("file.accumulated", low);
  EXPECT_EQ(r["comment"], "");
  low.erase("require_in");
  r = call("file.accumulated", low);
  EXPECT_EQ(r["result"], false);
  EXPECT_EQ(r["comment"], "Orphaned accumulator acc in s:acc");
}

TEST_F(file_tree_test, managed_backup_check_cmd_links_and_made_directories) {
  std::string f = sandbox_ + "/f.txt";
  json r = call("file.managed", {{"name", f}, {"contents", "x"}, {"create", false}});
  EXPECT_EQ(r["comment"], "File " + f + " is not present and is not set for creation");
  EXPECT_FALSE(fs::exists(f));

  // backup: minion keeps the old bytes under cachedir/file_backup.
  minion_.opts_["cachedir"] = dir_.file("cache");
  put(f, "old\n");
  r = call("file.managed", {{"name", f}, {"contents", "new"}, {"backup", "minion"}});
  EXPECT_EQ(r["result"], true) << r.dump(2);
  std::string bkdir = dir_.file("cache") + "/file_backup" + sandbox_;
  std::vector<std::string> backups;
  for (const auto& e : fs::directory_iterator(bkdir)) backups.push_back(e.path().filename().string());
  ASSERT_EQ(backups.size(), 1u);
  EXPECT_TRUE(backups[0].starts_with("f.txt_")) << backups[0];
  EXPECT_EQ(get(bkdir + "/" + backups[0]), "old\n");

  // check_cmd: Salt's comment with the command's output; the file stays.
  r = call("file.managed", {{"name", f}, {"contents", "newer"},
                            {"check_cmd", "sh -c 'echo nope; exit 2'"}});
  EXPECT_EQ(r["result"], false);
  EXPECT_EQ(r["comment"], "check_cmd execution failed\nnope");
  EXPECT_EQ(r["skip_watch"], true);
  EXPECT_EQ(get(f), "new\n");

  // A symlink's target is managed; follow_symlinks: False replaces the link.
  std::string link = sandbox_ + "/link.txt";
  fs::create_symlink(f, link);
  r = call("file.managed", {{"name", link}, {"contents", "through"}});
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(get(f), "through\n");
  r = call("file.managed", {{"name", link}, {"contents", "own"}, {"follow_symlinks", false}});
  EXPECT_FALSE(fs::is_symlink(link));
  EXPECT_EQ(get(link), "own\n");
  EXPECT_EQ(get(f), "through\n");

  // makedirs: directories get the file's mode with execute bits, or dir_mode.
  r = call("file.managed", {{"name", sandbox_ + "/m/n/o.txt"}, {"contents", "o"},
                            {"mode", "0640"}, {"makedirs", true}});
  EXPECT_EQ(mode_of(sandbox_ + "/m/n"), "0750");
  EXPECT_EQ(r["changes"], json({{"diff", "New file"}, {"mode", "0640"}}));
  r = call("file.managed", {{"name", sandbox_ + "/p/q.txt"}, {"contents", "q"},
                            {"makedirs", true}, {"dir_mode", "0700"}});
  EXPECT_EQ(mode_of(sandbox_ + "/p"), "0700");
}

TEST(file_tree, include_exclude_patterns_are_salts) {
  json glob = "*.txt", re = "E@^sub/", list = json::array({"*.bak", "*.log"});
  EXPECT_TRUE(check_include_exclude("a.txt", &glob, nullptr));
  EXPECT_FALSE(check_include_exclude("a.bak", &glob, nullptr));
  EXPECT_FALSE(check_include_exclude("sub/a.txt", &glob, &re));
  EXPECT_TRUE(check_include_exclude("x/sub/a.txt", nullptr, &re));
  EXPECT_FALSE(check_include_exclude("a.log", nullptr, &list));
  EXPECT_TRUE(check_include_exclude("a.txt", nullptr, &list));
  EXPECT_EQ(normalize_mode(json(644)), "0644");
  EXPECT_EQ(normalize_mode(json("0o750")), "0750");
  EXPECT_EQ(normalize_mode(json("00644")), "0644");
  EXPECT_FALSE(normalize_mode(json()).has_value());
}

}  // namespace
}  // namespace brine::states
