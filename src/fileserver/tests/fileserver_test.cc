#include <sys/stat.h>
#include <unistd.h>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <atomic>
#include <mutex>
#include <thread>
#include <asio/use_future.hpp>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>

#include "base/error.h"
#include "fileserver/client.h"
#include "fileserver/path.h"
#include "fileserver/pinned.h"
#include "fileserver/roots.h"
#include "fileserver/serve.h"
#include "fileserver/remote.h"
#include "fileserver/tests/tree.h"

namespace brine::fileserver {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

using test_tree::temp_dir;
using test_tree::write;

std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

template <class T>
T run(asio::awaitable<T> op) {
  asio::io_context io;
  auto fut = asio::co_spawn(io, std::move(op), asio::use_future);
  io.run();
  return fut.get();
}

TEST(FileServerPath, ParsesSaltUrls) {
  auto u = parse_url("salt://web/files/nginx.conf?saltenv=dev");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->path, "web/files/nginx.conf");
  EXPECT_EQ(u->saltenv, "dev");
  EXPECT_FALSE(parse_url("/etc/passwd"));
  EXPECT_FALSE(parse_url("http://x/y"));
  EXPECT_FALSE(parse_url("salt://a")->saltenv);
}

TEST(FileServerPath, RefusesPathsThatLeaveTheRoots) {
  EXPECT_EQ(check_path("a//b/./c").path, "a/b/c");
  EXPECT_EQ(check_path("/top.sls").path, "top.sls");
  EXPECT_NE(check_path("../etc/passwd").error, "");
  EXPECT_NE(check_path("a/../../b").error, "");
  EXPECT_NE(check_path("a/..").error, "");
  EXPECT_NE(check_path(std::string("a\0b", 3)).error, "");
  EXPECT_NE(check_path("a\\b").error, "");
  EXPECT_NE(check_path("").error, "");
  EXPECT_EQ(check_path("", true).error, "");
  EXPECT_EQ(check_path("a..b/..c").path, "a..b/..c");
  EXPECT_TRUE(valid_saltenv("base"));
  EXPECT_FALSE(valid_saltenv("../x"));
  EXPECT_FALSE(valid_saltenv(".."));
}

TEST(FileServerRoots, LayersRootsAndRefusesSymlinksOut) {
  temp_dir t;
  write(t.path() / "r1/top.sls", "one");
  write(t.path() / "r2/top.sls", "two");
  write(t.path() / "r2/web/init.sls", "web");
  write(t.path() / "outside/secret", "secret");
  fs::create_symlink(t.path() / "outside/secret", t.path() / "r1/leak");
  fs::create_symlink(t.path() / "outside", t.path() / "r1/leakdir");
  fs::create_symlink("web/init.sls", t.path() / "r2/alias.sls");
  roots r({{"base", {(t.path() / "r1").string(), (t.path() / "r2").string()}}},
          std::chrono::milliseconds(0));
  auto m = r.list("base");
  std::vector<std::string> paths;
  for (const auto& e : m->files) paths.push_back(e.path);
  EXPECT_EQ(paths, (std::vector<std::string>{"alias.sls", "top.sls", "web/init.sls"}));
  EXPECT_EQ(m->dirs, (std::vector<std::string>{"web"}));
  EXPECT_EQ(m->find("top.sls")->hash, hash_bytes("one"));
  EXPECT_EQ(r.read("base", "top.sls", 0, 100).data, "one");
  EXPECT_NE(r.read("base", "leak", 0, 100).error, "");
  EXPECT_NE(r.read("base", "leakdir/secret", 0, 100).error, "");
  EXPECT_EQ(r.read("base", "web/init.sls", 1, 1).data, "e");
  EXPECT_EQ(r.list("nope")->files.size(), 0u);

  std::string rev = m->revision;
  write(t.path() / "r2/web/init.sls", "web2");
  EXPECT_NE(r.list("base")->revision, rev);
}

TEST(FileServerServe, AnswersListsAndRefusesBadRequests) {
  temp_dir t;
  write(t.path() / "r/a.txt", "alpha");
  roots r({{"base", {(t.path() / "r").string()}}}, std::chrono::milliseconds(0));
  json l = serve(r, {{"op", "list"}, {"saltenv", "base"}}, 1024);
  ASSERT_EQ(l["files"].size(), 1u);
  json again = serve(r, {{"op", "list"}, {"saltenv", "base"}, {"revision", l["revision"]}}, 1024);
  EXPECT_TRUE(again.value("unchanged", false));
  EXPECT_TRUE(serve(r, {{"op", "list"}, {"saltenv", "../x"}}, 1024).contains("error"));
  EXPECT_TRUE(serve(r, {{"op", "frob"}, {"saltenv", "base"}}, 1024).contains("error"));
  EXPECT_TRUE(serve(r, {{"op", "get"}, {"saltenv", "base"}, {"files", 3}}, 1024).contains("error"));
  json g = serve(r, {{"op", "get"}, {"saltenv", "base"},
                     {"files", json::array({json::array({"../etc/passwd", 0}),
                                            json::array({"a.txt", 0})})}},
                 1024);
  EXPECT_NE(g["files"][0].value("error", ""), "");
  EXPECT_EQ(g["files"][1]["data"].get_binary().size(), 5u);
}

// A remote client against serve() in-process, counting requests.
struct loop_transport {
  roots* r;
  uint64_t max_reply;
  int* calls;
  asio::awaitable<json> operator()(json request) const {
    ++*calls;
    // Through MessagePack, as on the wire.
    auto bytes = json::to_msgpack(serve(*r, request, max_reply));
    co_return json::from_msgpack(bytes);
  }
};

TEST(FileServerRemote, FetchesOnlyWhatChangedInFewRequests) {
  temp_dir t;
  for (int i = 0; i < 300; ++i) {
    write(t.path() / "r" / ("f" + std::to_string(i) + ".sls"), "file " + std::to_string(i));
  }
  std::string big(3 * 1024 * 1024 + 17, 'x');
  big[12345] = 'y';
  write(t.path() / "r/big.bin", big);
  roots r({{"base", {(t.path() / "r").string()}}}, std::chrono::milliseconds(0));
  int calls = 0;
  remote_client c((t.path() / "cache").string(), loop_transport{&r, 1024 * 1024, &calls});

  auto dirs = run(c.tree("base"));
  ASSERT_EQ(dirs.size(), 1u);
  EXPECT_EQ(slurp(dirs[0] + "/f7.sls"), "file 7");
  EXPECT_FALSE(fs::exists(dirs[0] + "/big.bin"));  // above the prefetch limit
  // One list and few gets (1 MiB per reply here), not one per file.
  EXPECT_LE(calls, 4);
  EXPECT_EQ(c.stats().files_fetched, 300u);

  calls = 0;
  auto got = run(c.cache("base", {"big.bin", "f1.sls", "missing.sls"}));
  EXPECT_EQ(slurp(got[0].local), big);  // in 1 MiB chunks
  EXPECT_EQ(got[1].local, dirs[0] + "/f1.sls");
  EXPECT_NE(got[2].error, "");
  EXPECT_GE(calls, 5);  // a list and four chunks

  // A second sync: one list, nothing fetched.
  calls = 0;
  auto fetched = c.stats().files_fetched;
  run(c.tree("base"));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(c.stats().files_fetched, fetched);

  // A change and a removal on the master.
  write(t.path() / "r/f3.sls", "changed");
  fs::remove(t.path() / "r/f4.sls");
  run(c.tree("base"));
  EXPECT_EQ(slurp(dirs[0] + "/f3.sls"), "changed");
  EXPECT_FALSE(fs::exists(dirs[0] + "/f4.sls"));
  EXPECT_EQ(c.stats().files_fetched, fetched + 1);
}

// One listing per run: after the run's tree(), its states' files cost no
// request; the next run lists again and sees the master's change.
TEST(FileServerPinned, ARunListsEachSaltenvOnce) {
  temp_dir t;
  for (int i = 0; i < 50; ++i) {
    write(t.path() / "r" / ("f" + std::to_string(i) + ".txt"), "file " + std::to_string(i));
  }
  roots r({{"base", {(t.path() / "r").string()}}}, std::chrono::milliseconds(0));
  int calls = 0;
  remote_client c((t.path() / "cache").string(), loop_transport{&r, 1024 * 1024, &calls});
  {
    pinned_client run1(c);
    run(run1.tree("base"));
    int after_tree = calls;
    EXPECT_LE(after_tree, 3);  // a list and a get or two
    for (int i = 0; i < 50; ++i) {
      auto got = run(run1.cache("base", {"f" + std::to_string(i) + ".txt"}));
      ASSERT_EQ(got.size(), 1u);
      EXPECT_EQ(slurp(got[0].local), "file " + std::to_string(i));
    }
    EXPECT_EQ(calls, after_tree);  // 50 files, no request
    auto missing = run(run1.cache("base", {"nope.txt"}));
    EXPECT_NE(missing[0].error, "");
    EXPECT_EQ(calls, after_tree);
  }
  write(t.path() / "r/f3.txt", "changed");
  calls = 0;
  pinned_client run2(c);
  run(run2.tree("base"));
  auto got = run(run2.cache("base", {"f3.txt"}));
  EXPECT_EQ(slurp(got[0].local), "changed");
  EXPECT_EQ(calls, 2);  // the new listing and the changed file
}

// A master that moves to a new revision of its files (writes A2 and B2)
// just before it serves request number `switch_at` (counting from 1).
struct switching_transport {
  roots* r;
  fs::path dir;
  int switch_at;
  int* calls;
  asio::awaitable<json> operator()(json request) const {
    if (++*calls == switch_at) {
      write(dir / "a.txt", "A2\n");
      write(dir / "b.txt", "B2\n");
    }
    auto bytes = json::to_msgpack(serve(*r, request, 1024 * 1024));
    co_return json::from_msgpack(bytes);
  }
};

// gitfs's `brine fileserver update` moves a master between a run's listing
// and its fetches: the run reads both files of one revision or fails, never
// a.txt of one and b.txt of the other.
TEST(FileServerPinned, ARunNeverReadsTwoRevisions) {
  temp_dir t;
  fs::path dir = t.path() / "r";
  write(dir / "a.txt", "A1\n");
  write(dir / "b.txt", "B1\n");
  roots r({{"base", {dir.string()}}}, std::chrono::milliseconds(0));

  // a.txt was handed to the run before the switch: b.txt of the new
  // revision is refused, not fetched from a newer listing.
  int calls = 0;
  remote_client c((t.path() / "cache1").string(),
                  switching_transport{&r, dir, 3, &calls});  // list, get a, then the switch
  pinned_client run1(c);
  auto a = run(run1.cache("base", {"a.txt"}));
  ASSERT_EQ(a[0].error, "");
  EXPECT_EQ(slurp(a[0].local), "A1\n");
  auto b = run(run1.cache("base", {"b.txt"}));
  EXPECT_EQ(b[0].error, k_changed_on_master);
  EXPECT_EQ(b[0].local, "");
  // The minion's own next ask lists again and gets the new revision.
  auto again = run(c.cache("base", {"b.txt"}));
  ASSERT_EQ(again[0].error, "");
  EXPECT_EQ(slurp(again[0].local), "B2\n");

  // The switch comes during the run's first tree(), before it was handed
  // anything: the run lists again, once, and reads the new revision whole.
  write(dir / "a.txt", "A1\n");
  write(dir / "b.txt", "B1\n");
  calls = 0;
  remote_client fresh((t.path() / "cache2").string(),
                      switching_transport{&r, dir, 2, &calls});  // list, then the switch
  pinned_client run2(fresh);
  auto dirs = run(run2.tree("base"));
  ASSERT_EQ(dirs.size(), 1u);
  auto both = run(run2.cache("base", {"a.txt", "b.txt"}));
  EXPECT_EQ(slurp(both[0].local) + slurp(both[1].local), "A2\nB2\n");

  // After the tree was handed out, a file it left to be fetched later (one
  // above the prefetch limit) that changed since is an error.
  write(dir / "c.bin", std::string(2 * 1024 * 1024, 'c'));
  calls = 0;
  remote_client third((t.path() / "cache3").string(), switching_transport{&r, dir, 0, &calls});
  pinned_client run3(third);
  run(run3.tree("base"));
  write(dir / "c.bin", std::string(2 * 1024 * 1024, 'd'));
  auto big = run(run3.cache("base", {"c.bin"}));
  EXPECT_EQ(big[0].error, k_changed_on_master);
  EXPECT_EQ(run(third.cache("base", {"c.bin"}))[0].error, "");  // unpinned: the new listing
}

TEST(FileServerRemote, RefusesAManifestWithEscapingPaths) {
  temp_dir t;
  auto bad = [](json) -> asio::awaitable<json> {
    co_return json{{"revision", "r"},
                   {"files", json::array({json::array({"../../etc/x", "h", 1, 420})})}};
  };
  remote_client c((t.path() / "cache").string(), bad);
  EXPECT_THROW(run(c.list("base")), base::error);
  EXPECT_THROW(run(c.list("../base")), base::error);
}

// A master that answers after a pause, so that many clients' requests
// overlap; counts the files each `get` asked for.
struct slow_transport {
  roots* r;
  std::mutex* mu;
  std::map<std::string, int>* gets;  // path -> times asked for (first chunk)

  asio::awaitable<json> operator()(json request) const {
    asio::steady_timer pause(co_await asio::this_coro::executor);
    pause.expires_after(std::chrono::milliseconds(5));
    co_await pause.async_wait(asio::use_awaitable);
    if (request.value("op", "") == "get") {
      std::lock_guard lock(*mu);
      for (const auto& f : request["files"]) {
        if (f[1].get<uint64_t>() == 0) ++(*gets)[f[0].get<std::string>()];
      }
    }
    auto bytes = json::to_msgpack(serve(*r, request, 1024 * 1024));
    co_return json::from_msgpack(bytes);
  }
};

// Runs `tree("base")` on every client at once, on four threads; the dirs
// each got.
std::vector<std::vector<std::string>> trees_at_once(
    std::vector<std::unique_ptr<shared_client>>& clients) {
  asio::io_context io;
  std::vector<std::vector<std::string>> out(clients.size());
  std::atomic<int> failed{0};
  for (size_t i = 0; i < clients.size(); ++i) {
    asio::co_spawn(io, clients[i]->tree("base"),
                   [&out, &failed, i](std::exception_ptr e, std::vector<std::string> dirs) {
                     if (e) ++failed;
                     out[i] = std::move(dirs);
                   });
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) threads.emplace_back([&io] { io.run(); });
  io.run();
  for (auto& t : threads) t.join();
  EXPECT_EQ(failed.load(), 0);
  return out;
}

TEST(FileServerShared, ManyClientsFetchEachFileOnce) {
  temp_dir t;
  for (int i = 0; i < 20; ++i) {
    write(t.path() / "r" / ("s" + std::to_string(i) + ".sls"), "state " + std::to_string(i));
  }
  roots r({{"base", {(t.path() / "r").string()}}}, std::chrono::milliseconds(0));
  auto cache = std::make_shared<file_cache>((t.path() / "cache").string());
  std::mutex mu;
  std::map<std::string, int> gets;
  std::vector<std::unique_ptr<shared_client>> clients;
  for (int i = 0; i < 50; ++i) {
    clients.push_back(std::make_unique<shared_client>(cache, slow_transport{&r, &mu, &gets}));
  }

  auto dirs = trees_at_once(clients);
  for (const auto& d : dirs) EXPECT_EQ(d, dirs[0]);
  ASSERT_EQ(dirs[0].size(), 1u);
  EXPECT_EQ(slurp(dirs[0][0] + "/s7.sls"), "state 7");
  // Each file asked of the master once, by one client; the others waited.
  EXPECT_EQ(gets.size(), 20u);
  for (const auto& [path, n] : gets) EXPECT_EQ(n, 1) << path;
  uint64_t fetched = 0;
  for (const auto& c : clients) fetched += c->stats().files_fetched;
  EXPECT_EQ(fetched, 20u);
  // No part file left behind.
  for (const auto& e : fs::recursive_directory_iterator(t.path() / "cache")) {
    EXPECT_EQ(e.path().filename().string().find(".brine-part"), std::string::npos) << e.path();
  }

  // A change and a removal on the master: fetched once more, the removed
  // file gone from the shared mirror.
  write(t.path() / "r/s3.sls", "changed");
  fs::remove(t.path() / "r/s4.sls");
  gets.clear();
  dirs = trees_at_once(clients);
  EXPECT_EQ(slurp(dirs[0][0] + "/s3.sls"), "changed");
  EXPECT_FALSE(fs::exists(dirs[0][0] + "/s4.sls"));
  EXPECT_EQ(gets, (std::map<std::string, int>{{"s3.sls", 1}}));

  // A file the master lacks is an error for each client that asks.
  auto got = run(clients[0]->cache("base", {"s1.sls", "missing.sls"}));
  EXPECT_EQ(got[0].local, dirs[0][0] + "/s1.sls");
  EXPECT_NE(got[1].error, "");
}

TEST(FileServerLocal, ServesTheRootsInPlace) {
  temp_dir t;
  write(t.path() / "r/x/y.txt", "y");
  local_client c({{"base", {(t.path() / "r").string()}}});
  auto got = run(c.cache("base", {"x/y.txt", "nope"}));
  EXPECT_EQ(got[0].local, fs::canonical(t.path() / "r/x/y.txt").string());
  EXPECT_EQ(got[0].hash, hash_bytes("y"));
  EXPECT_NE(got[1].error, "");
  EXPECT_EQ(run(c.tree("base")), (std::vector<std::string>{(t.path() / "r").string()}));
}

}  // namespace
}  // namespace brine::fileserver
