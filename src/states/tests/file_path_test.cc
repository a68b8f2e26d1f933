// file.absent, file.symlink, file.touch, file.exists, file.missing and
// file.copy in a temporary directory: applied, applied again (no changes),
// under test (nothing changed), and their errors, with Salt 3006's comments.

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "states/tests/state_fixture.h"

namespace brine::states {
namespace {

namespace fs = std::filesystem;

using file_path_test = state_fixture;

TEST_F(file_path_test, absent_removes_files_and_directories) {
  write("f.txt", "x");
  fs::create_directories(path("d/sub"));
  write("d/sub/g.txt", "y");
  json t = call("file.absent", {{"name", path("f.txt")}}, true);
  EXPECT_TRUE(t["result"].is_null());
  EXPECT_EQ(t["comment"], "File " + path("f.txt") + " is set for removal");
  EXPECT_TRUE(fs::exists(path("f.txt")));
  json r = call("file.absent", {{"name", path("f.txt")}});
  EXPECT_EQ(r.dump(), json({{"name", path("f.txt")},
                            {"changes", {{"removed", path("f.txt")}}},
                            {"result", true},
                            {"comment", "Removed file " + path("f.txt")}})
                          .dump());
  EXPECT_FALSE(fs::exists(path("f.txt")));
  EXPECT_EQ(call("file.absent", {{"name", path("d")}}, true)["comment"],
            "Directory " + path("d") + " is set for removal");
  EXPECT_EQ(call("file.absent", {{"name", path("d")}})["comment"], "Removed directory " + path("d"));
  EXPECT_FALSE(fs::exists(path("d")));
  json again = call("file.absent", {{"name", path("d")}});
  EXPECT_EQ(again["comment"], "File " + path("d") + " is not present");
  EXPECT_TRUE(again["changes"].empty());
  EXPECT_EQ(call("file.absent", {{"name", "relative"}})["comment"],
            "Specified file relative is not an absolute path");
  EXPECT_EQ(call("file.absent", {{"name", "/"}})["comment"], "Refusing to make \"/\" absent");
}

TEST_F(file_path_test, exists_and_missing_only_look) {
  write("here", "");
  EXPECT_EQ(call("file.exists", {{"name", path("here")}})["comment"], "Path " + path("here") + " exists");
  json no = call("file.exists", {{"name", path("gone")}});
  EXPECT_EQ(no["result"], false);
  EXPECT_EQ(no["comment"], "Specified path " + path("gone") + " does not exist");
  EXPECT_EQ(call("file.missing", {{"name", path("gone")}})["comment"], "Path " + path("gone") + " is missing");
  EXPECT_EQ(call("file.missing", {{"name", path("here")}})["comment"],
            "Specified path " + path("here") + " exists");
}

TEST_F(file_path_test, touch_creates_then_updates) {
  json t = call("file.touch", {{"name", path("t")}}, true);
  EXPECT_TRUE(t["result"].is_null());
  EXPECT_EQ(t["comment"], "File " + path("t") + " is set to be created");
  EXPECT_FALSE(fs::exists(path("t")));
  json r = call("file.touch", {{"name", path("t")}});
  EXPECT_EQ(r["comment"], "Created empty file " + path("t"));
  EXPECT_EQ(r["changes"]["new"], path("t"));
  json again = call("file.touch", {{"name", path("t")}});
  EXPECT_EQ(again["comment"], "Updated times on file " + path("t"));
  EXPECT_EQ(again["changes"]["touched"], path("t"));
  json t2 = call("file.touch", {{"name", path("t")}}, true);
  EXPECT_EQ(t2["result"], true);
  EXPECT_EQ(t2["comment"], "File " + path("t") + " exists and has the correct times");
  EXPECT_EQ(call("file.touch", {{"name", path("no/dir/t")}})["comment"],
            "Directory not present to touch file " + path("no/dir/t"));
  EXPECT_EQ(call("file.touch", {{"name", path("a/b/t")}, {"makedirs", true}})["result"], true);
  EXPECT_TRUE(fs::exists(path("a/b/t")));
  EXPECT_EQ(call("file.touch", {{"name", path("t")}, {"atime", 5}})["result"], false);
}

TEST_F(file_path_test, symlink_created_retargeted_and_refused) {
  write("target", "x");
  json low = {{"name", path("link")}, {"target", path("target")}};
  json t = call("file.symlink", low, true);
  EXPECT_TRUE(t["result"].is_null());
  EXPECT_EQ(t["comment"], "Symlink " + path("link") + " to " + path("target") + " is set for creation");
  EXPECT_FALSE(fs::is_symlink(path("link")));
  json r = call("file.symlink", low);
  EXPECT_EQ(r["comment"], "Created new symlink " + path("link") + " -> " + path("target"));
  EXPECT_EQ(r["changes"]["new"], path("link"));
  EXPECT_EQ(fs::read_symlink(path("link")).string(), path("target"));
  json again = call("file.symlink", low);
  EXPECT_TRUE(again["changes"].empty());
  EXPECT_TRUE(again["comment"].get<std::string>().starts_with("Symlink " + path("link") + " is present and owned by "));
  EXPECT_EQ(call("file.symlink", low, true)["comment"], "The symlink " + path("link") + " is present");

  json other = {{"name", path("link")}, {"target", path("elsewhere")}};
  EXPECT_EQ(call("file.symlink", other, true)["comment"],
            "Link " + path("link") + " target is set to be changed to " + path("elsewhere"));
  EXPECT_EQ(call("file.symlink", other)["changes"]["new"], path("link"));
  EXPECT_EQ(fs::read_symlink(path("link")).string(), path("elsewhere"));

  write("file", "in the way");
  json in_way = {{"name", path("file")}, {"target", path("target")}};
  EXPECT_EQ(call("file.symlink", in_way)["comment"],
            "File exists where the symlink " + path("file") + " should be");
  EXPECT_EQ(call("file.symlink", in_way, true)["comment"],
            "File or directory exists where the symlink " + path("file") +
                " should be. Did you mean to use force?");
  in_way["backupname"] = "file.bak";
  EXPECT_EQ(call("file.symlink", in_way)["result"], true);
  EXPECT_EQ(read("file.bak"), "in the way");
  EXPECT_TRUE(fs::is_symlink(path("file")));

  write("forced", "x");
  EXPECT_EQ(call("file.symlink", {{"name", path("forced")}, {"target", "t"}, {"force", true}})["result"], true);
  EXPECT_TRUE(fs::is_symlink(path("forced")));

  EXPECT_EQ(call("file.symlink", {{"name", path("no/parent")}, {"target", "t"}})["comment"],
            "Directory " + path("no") + " for symlink is not present");
  EXPECT_EQ(call("file.symlink", {{"name", path("no/parent")}, {"target", "t"}}, true)["comment"],
            "Symlink " + path("no/parent") + " to t is set for creation\nDirectory " + path("no") +
                " for symlink is not present");
  EXPECT_EQ(call("file.symlink", {{"name", path("no/parent")}, {"target", "t"}, {"makedirs", true}})["result"], true);
  EXPECT_EQ(call("file.symlink", {{"name", path("l2")}, {"target", "t"}, {"user", "no-such-user-x"}})["comment"],
            "User no-such-user-x does not exist");
}

TEST_F(file_path_test, copy_once_unless_forced) {
  write("src", "data");
  ::chmod(path("src").c_str(), 0640);
  json low = {{"name", path("dst")}, {"source", path("src")}};
  json t = call("file.copy", low, true);
  EXPECT_TRUE(t["result"].is_null());
  EXPECT_EQ(t["comment"], "File \"" + path("src") + "\" is set to be copied to \"" + path("dst") + "\"");
  EXPECT_FALSE(fs::exists(path("dst")));
  json r = call("file.copy", low);
  EXPECT_EQ(r.dump(), json({{"name", path("dst")},
                            {"changes", {{path("dst"), path("src")}}},
                            {"comment", "Copied \"" + path("src") + "\" to \"" + path("dst") + "\""},
                            {"result", true}})
                          .dump());
  EXPECT_EQ(read("dst"), "data");
  struct stat st {};
  ::stat(path("dst").c_str(), &st);
  EXPECT_EQ(st.st_mode & 07777, 0640U);
  write("src", "new data");
  json again = call("file.copy", low);
  EXPECT_EQ(again["comment"], "The target file \"" + path("dst") + "\" exists and will not be overwritten");
  EXPECT_EQ(read("dst"), "data");
  low["force"] = true;
  EXPECT_EQ(call("file.copy", low)["changes"][path("dst")], path("src"));
  EXPECT_EQ(read("dst"), "new data");
  json moded = call("file.copy", {{"name", path("m")}, {"source", path("src")}, {"mode", "0600"}});
  EXPECT_EQ(moded["changes"]["mode"], "0600");
  EXPECT_EQ(call("file.copy", {{"name", path("x/y")}, {"source", path("src")}})["comment"],
            "The target directory " + path("x") + " is not present");
  EXPECT_EQ(call("file.copy", {{"name", path("x/y")}, {"source", path("src")}, {"makedirs", true}})["result"], true);
  EXPECT_EQ(call("file.copy", {{"name", path("z")}, {"source", path("nope")}})["comment"],
            "Source file \"" + path("nope") + "\" is not present");
}

}  // namespace
}  // namespace brine::states
