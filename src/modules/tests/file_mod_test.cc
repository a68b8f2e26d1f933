// Tests of the file module, on files each test creates in its own temp dir.
// Expected diffs and substitutions were produced with CPython's difflib and
// re, which Salt uses.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "modules/process.h"
#include "modules/registry.h"
#include "modules/tests/test_util.h"

namespace brine::modules {
namespace {

using namespace testing;
using json = nlohmann::json;
namespace fs = std::filesystem;

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

mode_t mode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

class file_mod_test : public module_test {
 protected:
  file_mod_test() : module_test(register_file_module, 60s) {}
  std::string path(const std::string& name) const { return dir_.file(name); }

  temp_dir dir_;
};

TEST_F(file_mod_test, every_function_is_registered_with_a_cli_example) {
  for (const char* fun :
       {"file.file_exists", "file.directory_exists", "file.read", "file.write", "file.append",
        "file.touch", "file.remove", "file.mkdir", "file.stats", "file.get_hash", "file.chmod",
        "file.chown", "file.symlink", "file.readlink", "file.find", "file.replace", "file.contains",
        "file.search", "file.readdir", "file.get_user", "file.get_group", "file.get_uid",
        "file.get_gid", "file.get_mode", "file.is_link", "file.contains_regex",
        "file.check_hash"}) {
    ASSERT_NE(reg_.find(fun), nullptr) << fun;
    EXPECT_TRUE(reg_.doc(fun).starts_with(std::string(fun) + "(")) << reg_.doc(fun);
    EXPECT_CONTAINS(reg_.doc(fun), "\n\nCLI example: brine cmd '*' " + std::string(fun));
  }
}

TEST_F(file_mod_test, exists_tells_files_from_directories) {
  write_text(path("f"), "x");
  fs::create_directory(path("d"));
  fs::create_symlink(path("f"), path("link"));
  struct row {
    std::string name;
    bool file, dir;
  };
  for (const row& r : {row{"f", true, false}, row{"d", false, true}, row{"link", true, false},
                       row{"missing", false, false}}) {
    EXPECT_EQ(ret("file.file_exists", {path(r.name)}), r.file) << r.name;
    EXPECT_EQ(ret("file.directory_exists", {path(r.name)}), r.dir) << r.name;
  }
}

// Salt's file.readdir: '.', '..', then the entries (os.listdir's order).
TEST_F(file_mod_test, readdir_lists_dot_dotdot_and_the_entries) {
  fs::create_directory(path("r"));
  write_text(path("r/a"), "x");
  fs::create_directory(path("r/sub"));
  auto got = ret("file.readdir", {path("r")});
  ASSERT_EQ(got.size(), 4u) << got.dump();
  EXPECT_EQ(got[0], ".");
  EXPECT_EQ(got[1], "..");
  std::vector<std::string> rest = {got[2].get<std::string>(), got[3].get<std::string>()};
  std::sort(rest.begin(), rest.end());
  EXPECT_EQ(rest, (std::vector<std::string>{"a", "sub"}));
  EXPECT_CONTAINS(error_of("file.readdir", {"relative"}), "Dir path must be absolute.");
  EXPECT_CONTAINS(error_of("file.readdir", {path("r/a")}), "A valid directory was not specified.");
}

TEST_F(file_mod_test, write_replaces_and_read_returns_the_lines) {
  write_text(path("w"), "old content that goes\n");
  EXPECT_EQ(ret("file.write", {path("w"), "one", "two"}), "Wrote 2 lines to \"" + path("w") + "\"");
  EXPECT_EQ(read_text(path("w")), "one\ntwo\n");
  EXPECT_EQ(ret("file.read", {path("w")}), "one\ntwo\n");
  EXPECT_EQ(ret("file.read", {path("w")}, {{"binary", true}}), "one\ntwo\n");

  // Salt's args= keyword, and numbers written as Python prints them.
  EXPECT_EQ(ret("file.write", json::array(), {{"path", path("w")}, {"args", {"a", 7, true}}}),
            "Wrote 3 lines to \"" + path("w") + "\"");
  EXPECT_EQ(read_text(path("w")), "a\n7\nTrue\n");
}

TEST_F(file_mod_test, append_ends_the_last_line_first) {
  struct row {
    std::string before, after;
  };
  for (const row& r : {row{"", "x\ny\n"}, row{"a", "a\nx\ny\n"}, row{"a\n", "a\nx\ny\n"}}) {
    write_text(path("ap"), r.before);
    EXPECT_EQ(ret("file.append", {path("ap"), "x", "y"}),
              "Wrote 2 lines to \"" + path("ap") + "\"");
    EXPECT_EQ(read_text(path("ap")), r.after) << "before: " << r.before;
  }
  EXPECT_CONTAINS(error_of("file.append", {path("missing"), "x"}), "No such file");
}

TEST_F(file_mod_test, read_errors_name_the_file) {
  EXPECT_CONTAINS(error_of("file.read", {path("missing")}), path("missing"));
  write_text(path("bin"), std::string("\xff\xfe\x00\x01", 4));
  EXPECT_CONTAINS(error_of("file.read", {path("bin")}), "not UTF-8");
  EXPECT_CONTAINS(error_of("file.read", {dir_.path()}), "Is a directory");
}

TEST_F(file_mod_test, touch_creates_and_sets_times) {
  EXPECT_EQ(ret("file.touch", {path("t")}), true);
  EXPECT_TRUE(fs::is_regular_file(path("t")));
  EXPECT_EQ(ret("file.touch", {path("t")}, {{"atime", 1000000000}, {"mtime", "1234567890"}}), true);
  struct stat st {};
  ASSERT_EQ(::stat(path("t").c_str(), &st), 0);
  EXPECT_EQ(st.st_atime, 1000000000);
  EXPECT_EQ(st.st_mtime, 1234567890);
  EXPECT_CONTAINS(error_of("file.touch", {path("t")}, {{"mtime", "soon"}}),
                  "mtime must be an integer");
}

TEST_F(file_mod_test, remove_removes_files_links_and_trees) {
  write_text(path("f"), "x");
  fs::create_directories(path("tree/a/b"));
  write_text(path("tree/a/b/c"), "x");
  fs::create_symlink(path("tree"), path("link"));
  EXPECT_EQ(ret("file.remove", {path("link")}), true);
  EXPECT_TRUE(fs::exists(path("tree/a/b/c"))) << "removing a link must not touch its target";
  EXPECT_EQ(ret("file.remove", {path("f")}), true);
  EXPECT_EQ(ret("file.remove", {path("tree")}), true);
  EXPECT_FALSE(fs::exists(path("f")));
  EXPECT_FALSE(fs::exists(path("tree")));
  EXPECT_EQ(ret("file.remove", {path("f")}), false);
  EXPECT_CONTAINS(error_of("file.remove", {"relative/path"}), "must be absolute");
}

TEST_F(file_mod_test, mkdir_creates_parents_with_the_mode) {
  const std::string deep = path("a/b/c");
  EXPECT_EQ(ret("file.mkdir", {deep}, {{"mode", "750"}}), true);
  EXPECT_TRUE(fs::is_directory(deep));
  EXPECT_EQ(mode_of(path("a")), 0750u);
  EXPECT_EQ(mode_of(deep), 0750u);
  // An existing directory is left as it is.
  ::chmod(deep.c_str(), 0700);
  EXPECT_EQ(ret("file.mkdir", {deep}, {{"mode", 755}}), true);
  EXPECT_EQ(mode_of(deep), 0700u);
  EXPECT_CONTAINS(error_of("file.mkdir", {path("x")}, {{"user", "brine-no-such-user"}}),
                  "User does not exist");
  EXPECT_CONTAINS(error_of("file.mkdir", {path("x")}, {{"mode", "rwx"}}), "mode must be");
  write_text(path("file"), "");
  EXPECT_CONTAINS(error_of("file.mkdir", {path("file")}), "not a directory");
}

TEST_F(file_mod_test, stats_reports_salts_fields) {
  write_text(path("s"), "abc");
  ::chmod(path("s").c_str(), 0640);
  json st = ret("file.stats", {path("s")}, {{"hash_type", "md5"}});
  struct stat real {};
  ASSERT_EQ(::stat(path("s").c_str(), &real), 0);
  EXPECT_EQ(st["inode"], real.st_ino);
  EXPECT_EQ(st["uid"], real.st_uid);
  EXPECT_EQ(st["gid"], real.st_gid);
  EXPECT_EQ(st["size"], 3);
  EXPECT_EQ(st["mode"], "0640");
  EXPECT_EQ(st["type"], "file");
  EXPECT_EQ(st["sum"], "900150983cd24fb0d6963f7d28e17f72");
  EXPECT_EQ(st["target"], fs::canonical(path("s")).string());
  EXPECT_DOUBLE_EQ(st["mtime"].get<double>(), real.st_mtim.tv_sec + real.st_mtim.tv_nsec / 1e9);
  if (const passwd* pw = ::getpwuid(real.st_uid)) {
    EXPECT_EQ(st["user"], pw->pw_name);
  }
  EXPECT_FALSE(ret("file.stats", {path("s")}).contains("sum"));

  fs::create_directory(path("d"));
  fs::create_symlink(path("s"), path("l"));
  fs::create_symlink(path("nowhere"), path("broken"));
  ASSERT_EQ(::mkfifo(path("p").c_str(), 0600), 0);
  struct row {
    std::string name;
    bool follow;
    std::string type;
  };
  for (const row& r : {row{"d", true, "dir"}, row{"l", true, "file"}, row{"l", false, "link"},
                       row{"broken", true, "link"}, row{"p", true, "pipe"}}) {
    EXPECT_EQ(ret("file.stats", {path(r.name)}, {{"follow_symlinks", r.follow}})["type"], r.type)
        << r.name;
  }
  EXPECT_CONTAINS(error_of("file.stats", {path("missing")}), "Path not found: " + path("missing"));
}

TEST_F(file_mod_test, get_hash_knows_salts_forms) {
  write_text(path("abc"), "abc");
  struct row {
    std::string form, digest;
  };
  for (const row& r :
       {row{"md5", "900150983cd24fb0d6963f7d28e17f72"},
        row{"sha1", "a9993e364706816aba3e25717850c26c9cd0d89d"},
        row{"sha224", "23097d223405d8228642a477bda255b32aadbce4bda0b3f7e36c9da7"},
        row{"sha256", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        row{"sha384",
            "cb00753f45a35e8bb5a03d699ac65007272c32ab0eded1631a8b605a43ff5bed8086072ba1e7cc2358baec"
            "a1"
            "34c825a7"},
        row{"sha512",
            "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c"
            "2"
            "3a3feebbd454d4423643ce80e2a9ac94fa54ca49f"}}) {
    EXPECT_EQ(ret("file.get_hash", {path("abc"), r.form}), r.digest) << r.form;
  }
  EXPECT_EQ(ret("file.get_hash", {path("abc")}), ret("file.get_hash", {path("abc"), "sha256"}));
  EXPECT_CONTAINS(error_of("file.get_hash", {path("abc"), "crc32"}), "Invalid hash type: crc32");
  EXPECT_CONTAINS(error_of("file.get_hash", {path("missing")}), path("missing"));
}

// A big file is hashed in chunks, other coroutines running between them; the
// digest matches sha256sum's.
TEST_F(file_mod_test, get_hash_of_a_big_file_lets_others_run) {
  std::string big;
  for (int i = 0; big.size() < (std::size_t{20} << 20); ++i) big += std::to_string(i) + "\n";
  write_text(path("big"), big);
  process_result sum = run_argv({"sha256sum", path("big")});
  ASSERT_EQ(sum.retcode, 0);
  const std::string expected = sum.stdout_text.substr(0, 64);

  asio::io_context ctx;
  bool done = false;
  int ticks = 0;
  std::string digest;
  const function* fn = reg_.find("file.get_hash");
  asio::co_spawn(ctx, (*fn)(make_call("file.get_hash", {path("big")})),
                 [&](std::exception_ptr e, outcome o) {
                   done = true;
                   if (!e) digest = o.ret.get<std::string>();
                 });
  asio::co_spawn(
      ctx,
      [](bool* done_flag, int* count) -> asio::awaitable<void> {
        while (!*done_flag) {
          ++*count;
          co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
        }
      }(&done, &ticks),
      asio::detached);
  ctx.run_for(std::chrono::seconds(60));
  ASSERT_TRUE(done);
  EXPECT_EQ(digest, expected);
  EXPECT_GT(ticks, 1) << "the hash never gave the executor back";
}

TEST_F(file_mod_test, chmod_returns_the_new_mode) {
  write_text(path("m"), "");
  struct row {
    json mode;
    std::string text;
    mode_t bits;
  };
  for (const row& r : {row{"640", "0640", 0640}, row{755, "0755", 0755}, row{"0o600", "0600", 0600},
                       row{"04755", "4755", 04755}, row{"0", "0000", 0}}) {
    EXPECT_EQ(ret("file.chmod", {path("m"), r.mode}), r.text) << r.mode;
    EXPECT_EQ(mode_of(path("m")), r.bits) << r.mode;
  }
  EXPECT_CONTAINS(error_of("file.chmod", {path("missing"), "644"}), "does not exist");
  EXPECT_CONTAINS(error_of("file.chmod", {path("m"), "999"}), "mode must be an octal mode");
}

TEST_F(file_mod_test, chown_to_oneself_succeeds_and_unknowns_are_reported) {
  write_text(path("o"), "");
  const passwd* pw = ::getpwuid(::geteuid());
  ASSERT_NE(pw, nullptr);
  outcome done = call_fn(make_call("file.chown", {path("o"), pw->pw_name, ::getegid()}));
  EXPECT_TRUE(done.success);
  EXPECT_TRUE(done.ret.is_null()) << done.ret.dump();

  outcome unknown =
      call_fn(make_call("file.chown", {path("o"), "brine-no-such-user", "brine-no-such-group"}));
  EXPECT_FALSE(unknown.success);
  EXPECT_EQ(unknown.ret, "User does not exist\nGroup does not exist\n");

  outcome missing = call_fn(make_call("file.chown", {path("missing"), pw->pw_name, nullptr}));
  EXPECT_FALSE(missing.success);
  EXPECT_EQ(missing.ret, "File not found");
}

TEST_F(file_mod_test, symlink_and_readlink) {
  write_text(path("t1"), "");
  write_text(path("t2"), "");
  const std::string link = path("link");
  EXPECT_EQ(ret("file.symlink", {path("t1"), link}), true);
  EXPECT_EQ(fs::read_symlink(link), path("t1"));
  EXPECT_EQ(ret("file.symlink", {path("t1"), link}), true) << "already right";
  EXPECT_CONTAINS(error_of("file.symlink", {path("t2"), link}), "Found existing symlink: " + link);
  EXPECT_EQ(ret("file.symlink", {path("t2"), link}, {{"force", true}}), true);
  EXPECT_EQ(fs::read_symlink(link), path("t2"));
  EXPECT_CONTAINS(error_of("file.symlink", {path("t2"), path("t1")}),
                  "Existing path is not a symlink");
  EXPECT_CONTAINS(error_of("file.symlink", {path("t2"), "rel"}), "must be absolute");

  EXPECT_EQ(ret("file.readlink", {link}), path("t2"));
  fs::create_symlink("link", path("link2"));
  EXPECT_EQ(ret("file.readlink", {path("link2")}), "link");
  EXPECT_EQ(ret("file.readlink", {path("link2")}, {{"canonicalize", true}}),
            fs::canonical(path("t2")).string());
  EXPECT_CONTAINS(error_of("file.readlink", {path("t1")}), "A valid link was not specified");
}

TEST_F(file_mod_test, find_filters_like_salts_find) {
  const std::string root = path("root");
  fs::create_directories(root + "/sub/deep");
  for (const char* f : {"a.conf", "b.txt", "sub/c.conf", "sub/deep/D.CONF"}) {
    write_text(root + "/" + f, "");
  }
  fs::create_symlink(root + "/a.conf", root + "/ln");
  auto p = [&](const std::string& s) { return root + (s.empty() ? "" : "/" + s); };
  struct row {
    json kwargs;
    std::vector<std::string> expected;
  };
  const std::vector<row> rows = {
      {{{"name", "*.conf"}}, {p("a.conf"), p("sub/c.conf")}},
      {{{"iname", "*.conf"}}, {p("a.conf"), p("sub/c.conf"), p("sub/deep/D.CONF")}},
      {{{"type", "d"}}, {p(""), p("sub"), p("sub/deep")}},
      {{{"type", "l"}}, {p("ln")}},
      {{{"type", "f,l"}, {"maxdepth", 1}}, {p("a.conf"), p("b.txt"), p("ln")}},
      {{{"type", "f"}, {"mindepth", 2}}, {p("sub/c.conf"), p("sub/deep/D.CONF")}},
      {{{"regex", "[ab]\\."}}, {p("a.conf"), p("b.txt")}},
      {{{"iregex", "d\\.conf$"}}, {p("sub/deep/D.CONF")}},
      {{{"name", "c.conf"}, {"print", "name"}}, {"c.conf"}},
      {{{"name", "nothing"}}, {}},
  };
  for (const row& r : rows) {
    EXPECT_EQ(ret("file.find", {root}, r.kwargs), json(r.expected)) << r.kwargs.dump();
  }
  EXPECT_EQ(ret("file.find", {path("missing")}), json::array());
  EXPECT_CONTAINS(error_of("file.find", {root}, {{"type", "x"}}), "invalid file type");
  EXPECT_CONTAINS(error_of("file.find", {root}, {{"size", "+1k"}}),
                  "unknown keyword argument 'size'");
}

TEST_F(file_mod_test, find_stops_past_its_entry_limit) {
  // 100,001 entries: 101 directories of 990 empty files each.
  const std::string root = path("huge");
  fs::create_directory(root);
  for (int d = 0; d < 101; ++d) {
    const std::string sub = root + "/" + std::to_string(d);
    fs::create_directory(sub);
    for (int f = 0; f < 990; ++f) {
      int fd = ::open((sub + "/" + std::to_string(f)).c_str(), O_WRONLY | O_CREAT, 0600);
      ASSERT_GE(fd, 0);
      ::close(fd);
    }
  }
  EXPECT_CONTAINS(error_of("file.find", {root}, {{"name", "nothing"}}),
                  "more than 100000 entries under " + root);
  // Depth limits keep a search below the limit.
  EXPECT_EQ(ret("file.find", {root}, {{"type", "d"}, {"maxdepth", 1}}).size(), 102u);
}

struct replace_row {
  std::string label, before;
  json args;  // pattern, repl
  json kwargs;
  std::string after;
  json ret;
};

TEST_F(file_mod_test, replace_matches_pythons_re_and_difflib) {
  const std::string twenty = [] {
    std::string s;
    for (int i = 1; i <= 20; ++i) s += "line" + std::to_string(i) + "\n";
    return s;
  }();
  const std::vector<replace_row> rows = {
      {"one line",
       "foo=1\nbar=2\n",
       {"^bar=.*$", "bar=3"},
       json::object(),
       "foo=1\nbar=3\n",
       "--- \n+++ \n@@ -1,2 +1,2 @@\n foo=1\n-bar=2\n+bar=3\n"},
      {"nothing matches", "foo=1\n", {"^nope", "x"}, json::object(), "foo=1\n", ""},
      {"count", "a a a\n", {"a", "b"}, {{"count", 1}, {"show_changes", false}}, "b a a\n", true},
      {"groups by number and name",
       "key = value\n",
       {"(?P<k>\\w+) = (\\w+)", "\\2 = \\g<k>\\t\\\\"},
       {{"show_changes", false}},
       "value = key\t\\\n",
       true},
      {"empty matches as Python 3.7",
       "abxd",
       {"x*", "-"},
       {{"flags", 0}, {"show_changes", false}},
       "-a-b--d-",
       true},
      {"flags by name",
       "Hello\n",
       {"^hello$", "bye"},
       {{"flags", {"IGNORECASE", "MULTILINE"}}, {"show_changes", false}},
       "bye\n",
       true},
      {"without MULTILINE ^ is the start",
       "a\na\n",
       {"^a", "b"},
       {{"flags", 0}, {"show_changes", false}},
       "b\na\n",
       true},
      {"same text is no change",
       "x=1\n",
       {"x=1", "x=1"},
       {{"show_changes", false}},
       "x=1\n",
       false},
      {"append when not found",
       "a\n",
       {"^x=.*", "x=1"},
       {{"append_if_not_found", true}},
       "a\nx=1\n",
       "--- \n+++ \n@@ -1 +1,2 @@\n a\n+x=1\n"},
      {"append is done once",
       "a\nx=1\n",
       {"^x=2", "x=1"},
       {{"append_if_not_found", true}},
       "a\nx=1\n",
       ""},
      {"prepend not_found_content",
       "a\nb",
       {"^zz", "unused"},
       {{"prepend_if_not_found", true}, {"not_found_content", "x"}},
       "x\na\nb",
       "--- \n+++ \n@@ -1,2 +1,3 @@\n+x\n a\n b"},
      {"backslash_literal",
       "path\n",
       {"path", "C:\\dir"},
       {{"backslash_literal", true}, {"show_changes", false}},
       "C:\\dir\n",
       true},
      {"two hunks",
       twenty,
       {"^line(2|18)$", "LINE\\1"},
       json::object(),
       [&] {
         std::string s = twenty;
         s.replace(s.find("line2\n"), 5, "LINE2");
         s.replace(s.find("line18\n"), 6, "LINE18");
         return s;
       }(),
       "--- \n+++ \n@@ -1,5 +1,5 @@\n line1\n-line2\n+LINE2\n line3\n line4\n line5\n"
       "@@ -15,6 +15,6 @@\n line15\n line16\n line17\n-line18\n+LINE18\n line19\n line20\n"},
  };
  for (const auto& r : rows) {
    const std::string f = path("r");
    write_text(f, r.before);
    json args = json::array({f});
    for (const auto& a : r.args) args.push_back(a);
    EXPECT_EQ(ret("file.replace", args, r.kwargs), r.ret) << r.label;
    EXPECT_EQ(read_text(f), r.after) << r.label;
  }
}

TEST_F(file_mod_test, replace_writes_atomically_keeping_mode_and_a_backup) {
  const std::string f = path("conf");
  write_text(f, "PermitRootLogin yes\n");
  ::chmod(f.c_str(), 0640);
  ret("file.replace", {f, "^PermitRootLogin .*", "PermitRootLogin no"});
  EXPECT_EQ(read_text(f), "PermitRootLogin no\n");
  EXPECT_EQ(mode_of(f), 0640u);
  EXPECT_EQ(read_text(f + ".bak"), "PermitRootLogin yes\n");
  EXPECT_EQ(mode_of(f + ".bak"), 0640u);
  for (const auto& e : fs::directory_iterator(dir_.path())) {
    EXPECT_EQ(e.path().filename().string().find(".brine-"), std::string::npos)
        << "temporary left behind: " << e.path();
  }

  // dry_run shows the change and leaves the file; backup=False makes none.
  json diff = ret("file.replace", {f, "no$", "yes"}, {{"dry_run", true}});
  EXPECT_EQ(diff, "--- \n+++ \n@@ -1 +1 @@\n-PermitRootLogin no\n+PermitRootLogin yes\n");
  EXPECT_EQ(read_text(f), "PermitRootLogin no\n");
  fs::remove(f + ".bak");
  ret("file.replace", {f, "no$", "yes"}, {{"backup", false}});
  EXPECT_EQ(read_text(f), "PermitRootLogin yes\n");
  EXPECT_FALSE(fs::exists(f + ".bak"));

  // Through a symlink, the target changes and the link stays.
  fs::create_symlink(f, path("via"));
  ret("file.replace", {path("via"), "yes", "maybe"}, {{"backup", ""}});
  EXPECT_TRUE(fs::is_symlink(path("via")));
  EXPECT_EQ(read_text(f), "PermitRootLogin maybe\n");
}

TEST_F(file_mod_test, replace_refuses_what_it_cannot_do) {
  write_text(path("bin"), std::string("ab\0cd", 5));
  write_text(path("t"), "text\n");
  struct row {
    json args, kwargs;
    std::string message;
  };
  const std::vector<row> rows = {
      {{path("missing"), "a", "b"}, json::object(), "File not found: " + path("missing")},
      {{path("bin"), "a", "b"}, json::object(), "binary file"},
      {{path("t"), "(", "b"}, json::object(), "bad pattern '('"},
      {{path("t"), "(t)", "\\2"}, json::object(), "invalid group reference 2"},
      {{path("t"), "t", "\\q"}, json::object(), "bad escape \\q"},
      {{path("t"), "t", "u"}, {{"flags", {"NOPE"}}}, "invalid re flag given: NOPE"},
      {{path("t"), "t", "u"},
       {{"append_if_not_found", true}, {"prepend_if_not_found", true}},
       "Only one of append and prepend_if_not_found"},
      {{path("t"), "t", "u"}, {{"bogus", 1}}, "unknown keyword argument 'bogus'"},
  };
  for (const auto& r : rows) {
    EXPECT_CONTAINS(error_of("file.replace", r.args, r.kwargs), r.message);
  }
  EXPECT_EQ(read_text(path("t")), "text\n");
  EXPECT_EQ(ret("file.replace", {path("missing"), "a", "b"}, {{"ignore_if_missing", true}}), false);
}

// Python's re (and PCRE2) handle a long line without recursing per character
// the way std::regex does.
TEST_F(file_mod_test, replace_on_a_long_line) {
  std::string line(std::size_t{2} << 20, 'a');
  write_text(path("long"), "x" + line + "y\n");
  EXPECT_EQ(ret("file.replace", {path("long"), "x[ab]+y", "short"}, {{"show_changes", false}}),
            true);
  EXPECT_EQ(read_text(path("long")), "short\n");
}

TEST_F(file_mod_test, search_and_contains) {
  const std::string f = path("s");
  write_text(f, "alpha\nBeta gamma\n");
  struct row {
    json args, kwargs;
    bool found;
  };
  for (const row& r :
       {row{{f, "^Beta"}, json::object(), true}, row{{f, "^gamma"}, json::object(), false},
        row{{f, "^beta"}, {{"flags", {"IGNORECASE", "MULTILINE"}}}, true},
        row{{f, "^Beta"}, {{"flags", 0}}, false},
        row{{f, "^Beta"}, {{"flags", 0}, {"multiline", true}}, true},
        row{{f, "alpha.Beta"}, {{"flags", "DOTALL"}}, true}}) {
    EXPECT_EQ(ret("file.search", r.args, r.kwargs), r.found) << r.args.dump() << r.kwargs.dump();
  }
  EXPECT_CONTAINS(error_of("file.search", {path("missing"), "x"}), "File not found");
  EXPECT_EQ(ret("file.search", {path("missing"), "x"}, {{"ignore_if_missing", true}}), false);

  EXPECT_EQ(ret("file.contains", {f, "Beta gam"}), true);
  EXPECT_EQ(ret("file.contains", {f, "  gamma\n"}), true) << "the text is stripped";
  EXPECT_EQ(ret("file.contains", {f, "delta"}), false);
  EXPECT_EQ(ret("file.contains", {path("missing"), "x"}), false);
  // Across the boundary between two 1 MiB chunks.
  std::string big(std::size_t{1} << 20, '.');
  big.replace(big.size() - 3, 3, "nee");
  write_text(path("big"), big + "dle" + std::string(100, '.'));
  EXPECT_EQ(ret("file.contains", {path("big"), "needle"}), true);
}

TEST_F(file_mod_test, get_user_group_mode_and_ids_read_stats) {
  write_text(path("s"), "abc");
  ::chmod(path("s").c_str(), 0640);
  fs::create_symlink(path("s"), path("l"));
  struct stat real {};
  ASSERT_EQ(::stat(path("s").c_str(), &real), 0);
  json st = ret("file.stats", {path("s")});
  EXPECT_EQ(ret("file.get_user", {path("s")}), st["user"]);
  EXPECT_EQ(ret("file.get_group", {path("s")}), st["group"]);
  EXPECT_EQ(ret("file.get_uid", {path("s")}), real.st_uid);
  EXPECT_EQ(ret("file.get_gid", {path("s")}), real.st_gid);
  EXPECT_EQ(ret("file.get_mode", {path("s")}), "0640");
  // Through the link by default; the link itself with follow_symlinks=False.
  EXPECT_EQ(ret("file.get_mode", {path("l")}), "0640");
  EXPECT_EQ(ret("file.get_mode", {path("l")}, {{"follow_symlinks", false}}), "0777");
  EXPECT_CONTAINS(error_of("file.get_user", {path("missing")}),
                  "Path not found: " + path("missing"));

  fs::create_symlink(path("nowhere"), path("broken"));
  EXPECT_EQ(ret("file.is_link", {path("l")}), true);
  EXPECT_EQ(ret("file.is_link", {path("broken")}), true);
  EXPECT_EQ(ret("file.is_link", {path("s")}), false);
  EXPECT_EQ(ret("file.is_link", {path("missing")}), false);
}

// Expected results from Python: Salt's loop over open(path) (text mode,
// universal newlines) with line.lstrip(lchar) and re.search.
TEST_F(file_mod_test, contains_regex_searches_each_line_as_salt_reads_it) {
  const std::string f = path("c");
  write_text(f, "PermitRootLogin no\r\n  #Port 22\nlast\rmac");
  struct row {
    std::string regex, lchar;
    bool found;
  };
  for (const row& r : {row{"^PermitRootLogin no$", "", true}, row{"no\r", "", false},
                       row{"^#Port", "", false}, row{"^#Port", " ", true},
                       row{"^#Port", " #", false}, row{"^Port", " #", true},
                       row{"^mac", "", true}, row{"^last\n", "", true},
                       row{"Root.*22", "", false}}) {
    EXPECT_EQ(ret("file.contains_regex", {f, r.regex}, {{"lchar", r.lchar}}), r.found)
        << r.regex << " lchar=" << r.lchar;
  }
  EXPECT_EQ(ret("file.contains_regex", {path("missing"), "x"}), false);
  EXPECT_CONTAINS(error_of("file.contains_regex", {f, "("}), "missing closing parenthesis");
}

TEST_F(file_mod_test, check_hash_takes_salts_three_forms) {
  write_text(path("abc"), "abc");
  const std::string md5 = "900150983cd24fb0d6963f7d28e17f72";
  const std::string sha256 = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
  EXPECT_EQ(ret("file.check_hash", {path("abc"), "md5:" + md5}), true);
  EXPECT_EQ(ret("file.check_hash", {path("abc"), "sha256=" + sha256}), true);
  EXPECT_EQ(ret("file.check_hash", {path("abc"), sha256}), true) << "64 digits: sha256";
  EXPECT_EQ(ret("file.check_hash", {path("abc"), md5}), true) << "32 digits: md5";
  EXPECT_EQ(ret("file.check_hash", {path("abc"), "sha256:" + md5}), false);
  EXPECT_CONTAINS(error_of("file.check_hash", {path("abc"), "abc"}),
                  "Hash abc (length: 3) could not be matched to a supported hash type");
  EXPECT_CONTAINS(error_of("file.check_hash", {path("abc"), 5}), "hash must be a string");
}

TEST_F(file_mod_test, bad_arguments_name_the_argument) {
  EXPECT_CONTAINS(error_of("file.read"), "missing argument 'path'");
  EXPECT_CONTAINS(error_of("file.read", {path("x"), false, 3}), "at most 2 positional");
  EXPECT_CONTAINS(error_of("file.stats", {path("x")}, {{"nope", 1}}),
                  "unknown keyword argument 'nope'");
  EXPECT_CONTAINS(error_of("file.write"), "missing argument 'path'");
  EXPECT_CONTAINS(error_of("file.find", {path("x")}, {{"maxdepth", "deep"}}),
                  "maxdepth must be an integer");
}

}  // namespace
}  // namespace brine::modules
