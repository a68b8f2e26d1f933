// libFuzzer target: what a minion may send the master's file server. The
// input is a file_request body (MessagePack, as the frame decoder hands it
// over) or, when it is not one, a raw path for the path checks. Must never
// crash or hang, and must never serve a byte from outside the roots: every
// file answered has a path that passes check_path and data from the tree
// made here (whose files all start with "inside"). The same request goes to
// the roots backend and to gitfs over a git repository of the same tree
// (made once with the git command), whose symlinks lead out of it too.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "fileserver/gitfs.h"
#include "fileserver/path.h"
#include "fileserver/roots.h"
#include "fileserver/serve.h"

namespace {

namespace fs = std::filesystem;

brine::fileserver::roots& tree() {
  static brine::fileserver::roots* r = [] {
    std::string dir = (fs::temp_directory_path() / "brine-fs-fuzz-XXXXXX").string();
    ::mkdtemp(dir.data());
    fs::create_directories(dir + "/root/a/b");
    std::ofstream(dir + "/root/top.sls") << "inside top";
    std::ofstream(dir + "/root/a/b/c.txt") << "inside c";
    std::ofstream(dir + "/secret") << "SECRET";
    fs::create_symlink(dir + "/secret", dir + "/root/leak");
    fs::create_symlink(dir, dir + "/root/up");
    return new brine::fileserver::roots({{"base", {dir + "/root"}}}, std::chrono::seconds(60));
  }();
  return *r;
}

// The tree above committed to a repository (with an absolute symlink and
// one that climbs out), served by gitfs from its bare clone.
brine::fileserver::gitfs& git_tree() {
  static brine::fileserver::gitfs* g = [] {
    std::string dir = (fs::temp_directory_path() / "brine-gitfs-fuzz-XXXXXX").string();
    ::mkdtemp(dir.data());
    std::string repo = dir + "/repo";
    fs::create_directories(repo + "/a/b");
    std::ofstream(repo + "/top.sls") << "inside top";
    std::ofstream(repo + "/a/b/c.txt") << "inside c";
    std::ofstream(dir + "/secret") << "SECRET";
    fs::create_symlink(dir + "/secret", repo + "/leak");
    fs::create_symlink("../secret", repo + "/up");
    fs::create_symlink("a/../../secret", repo + "/a/climb");
    fs::create_symlink("b", repo + "/a/loop");
    fs::create_symlink("self", repo + "/self");
    fs::create_symlink("..", repo + "/a/b/back");
    std::string git =
        "git -C " + repo + " -c user.name=f -c user.email=f@f -c init.defaultBranch=master ";
    if (std::system((git + "init -q && " + git + "add -A && " + git + "commit -q -m t").c_str()) !=
        0) {
      std::abort();
    }
    auto* out = new brine::fileserver::gitfs({{repo, "", "", "master"}}, dir + "/cache");
    auto f = out->fetch();
    if (!f.errors.empty() || !out->apply(f.pins).empty()) std::abort();
    return out;
  }();
  return *g;
}

void check_reply(const nlohmann::json& reply) {
  if (reply.contains("files") && reply["files"].is_array()) {
    for (const auto& f : reply["files"]) {
      if (!f.is_object() || !f.contains("data")) continue;
      std::string path = f.value("path", "");
      if (!brine::fileserver::check_path(path).error.empty()) std::abort();
      const auto& bytes = f["data"].get_binary();
      std::string served(bytes.begin(), bytes.end());
      if (served.find("SECRET") != std::string::npos) std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto checked = brine::fileserver::check_path(text, true);
  if (checked.error.empty() && checked.path.find("..") != std::string::npos) {
    for (size_t at = 0; (at = checked.path.find("..", at)) != std::string::npos; at += 2) {
      bool starts = at == 0 || checked.path[at - 1] == '/';
      bool ends = at + 2 == checked.path.size() || checked.path[at + 2] == '/';
      if (starts && ends) std::abort();  // a ".." component got through
    }
  }
  (void)brine::fileserver::parse_url(text);
  (void)brine::fileserver::valid_saltenv(text);

  nlohmann::json request = nlohmann::json::from_msgpack(data, data + size, true, false);
  if (request.is_discarded() || !request.is_object()) return 0;
  check_reply(brine::fileserver::serve(tree(), request, 4096));
  check_reply(brine::fileserver::serve(git_tree(), request, 4096));
  return 0;
}
