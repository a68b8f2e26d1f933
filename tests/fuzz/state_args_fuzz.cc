// State arguments: the low chunks a minion runs come from the master's state
// tree (or `state.low`/`state.single` arguments) and so from whoever writes
// it. This target hands arbitrary JSON to the state runner (src/apply) and to
// every state function (src/states) as their arguments, under test and for
// real, and checks what they answer:
//
// - nothing but a run's return comes out (no crash, no sanitizer report, no
//   exception but base::error, the run-level errors Salt raises too: the
//   runner turns a state's exception into its failure);
// - every state's return has Salt's keys (name, changes as a mapping,
//   result True/False/None, comment, a __run_num__ of its own: Salt's
//   numbers can skip, as a prereq's test call takes one, and a state that
//   gave up on a requisite loop shares the next one's, as in Salt);
// - under test, nothing in the file system changes (Salt's test=True).
//
// The states run in a sandbox: a private mount namespace in which the whole
// file system is read-only (devices too), but for a tmpfs on /mnt, the
// playground that the default state names and the state tree point into, and
// libFuzzer's own corpus and artifact directories. Whatever a state writes,
// under test by mistake or for real, fails or lands in memory and vanishes
// with the process. The execution functions it may
// call are the `instant` ones only (no child process, no timer, no I/O:
// test.*, grains.*, pillar.*, config.get ...): a fuzzed `unless` or
// `module.run` can run no command. Needs root or user namespaces; without
// either it refuses to run rather than write to the real file system.
//
// Input: byte 0 picks the state function of chunks that do not name one,
// byte 1 the mode (bit 0: test, bit 1: state.single, bit 2: state.sls_id),
// the rest is JSON: an object (one chunk's arguments) or an array of them.

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <vector>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "apply/runner.h"
#include "base/error.h"
#include "modules/context.h"
#include "modules/registry.h"
#include "states/registry.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;
using namespace brine;

[[noreturn]] void die(const std::string& what) {
  std::perror(what.c_str());
  std::abort();
}

void write_file(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

// The host's uid and gid, mapped to root inside a user namespace.
void map_ids(uid_t uid, gid_t gid) {
  write_file("/proc/self/setgroups", "deny");
  write_file("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1");
  write_file("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1");
}

// The mount points of this namespace, from /proc/self/mountinfo.
std::vector<std::string> mount_points() {
  std::vector<std::string> out;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, point;
    if (fields >> id >> parent >> dev >> root >> point) out.push_back(point);
  }
  return out;
}

// Enters the sandbox: a private mount namespace in which every mount is
// read-only, without devices or set-uid, except what libFuzzer writes (the
// corpus directories and artifacts named on the command line, and the
// working directory), and with a tmpfs on /mnt: the playground the states
// write into. Nothing of it is seen outside this process.
void enter_sandbox(int argc, char** argv) {
  uid_t uid = ::getuid();
  gid_t gid = ::getgid();
  std::vector<std::string> writable = {fs::current_path().string()};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    for (const char* flag : {"-artifact_prefix=", "-exact_artifact_path="}) {
      if (a.rfind(flag, 0) == 0) {
        std::string path = fs::absolute(a.substr(std::string(flag).size())).string();
        writable.push_back(path.back() == '/' ? path : fs::path(path).parent_path().string());
      }
    }
    std::error_code ec;
    if (a[0] != '-' && fs::is_directory(a, ec)) writable.push_back(fs::canonical(a).string());
  }
  for (const std::string& w : writable) {
    if (w == "/" || w == "/mnt" || w.rfind("/mnt/", 0) == 0) {
      std::fprintf(stderr, "state_args_fuzz: run it from, and keep its corpus in, a directory "
                           "other than / and /mnt (it mounts its playground on /mnt)\n");
      std::abort();
    }
  }
  if (::unshare(CLONE_NEWNS) != 0) {
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
      die("state_args_fuzz: cannot make a mount namespace (needs root or user namespaces)");
    }
    map_ids(uid, gid);
  }
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) die("mount private /");
  for (const std::string& w : writable) {
    if (::mount(w.c_str(), w.c_str(), nullptr, MS_BIND, nullptr) != 0) die("bind " + w);
  }
  for (const std::string& point : mount_points()) {
    if (std::find(writable.begin(), writable.end(), point) != writable.end()) continue;
    // Some mounts cannot be remounted here (locked in a user namespace);
    // the ones that matter (/, /etc's, /proc, /sys, /dev) can.
    ::mount(nullptr, point.c_str(), nullptr,
            MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NODEV | MS_NOSUID, nullptr);
  }
  if (::access("/etc/hostname", W_OK) == 0 || ::access("/proc/sys/kernel/hostname", W_OK) == 0) {
    std::fprintf(stderr, "state_args_fuzz: the file system is still writable; not fuzzing\n");
    std::abort();
  }
  if (::mount("brine-state-fuzz", "/mnt", "tmpfs", MS_NOSUID | MS_NODEV, "size=128m,mode=0755") !=
      0) {
    die("mount tmpfs on /mnt");
  }
}

// The playground's top directories (under /mnt), wiped before each input.
const char* const k_tree_dirs[] = {"/mnt/etc", "/mnt/srv", "/mnt/var", "/mnt/home", "/mnt/tmp"};

// A small state tree, a file to edit and the minion's cache directory.
void seed_files() {
  write_file("/mnt/srv/salt/a.txt", "alpha\nbeta\n");
  write_file("/mnt/srv/salt/tpl.jinja", "id={{ grains['id'] }} x={{ pillar.get('x') }}\n");
  write_file("/mnt/srv/salt/dir/b.txt", "bee\n");
  write_file("/mnt/srv/salt/dir/sub/c.conf", "key = value\n");
  write_file("/mnt/tmp/f.txt", "one\ntwo\n# three\n");
  write_file("/mnt/etc/hosts", "127.0.0.1 localhost\n");
  fs::create_directories("/mnt/var/cache/brine");
  fs::create_directories("/mnt/home");
}

void wipe_files() {
  std::error_code ec;
  for (const char* d : k_tree_dirs) fs::remove_all(d, ec);
}

// Each path with its type, size, mode and modification time.
std::map<std::string, std::string> snapshot() {
  std::map<std::string, std::string> out;
  for (const char* d : k_tree_dirs) {
    std::error_code ec;
    if (!fs::exists(d, ec)) continue;
    for (auto it = fs::recursive_directory_iterator(d, ec); !ec && it != fs::end(it);
         it.increment(ec)) {
      const std::string p = it->path().string();
      // Salt caches salt:// files under test too (cp.cache_file).
      if (p.rfind("/mnt/var/cache/brine", 0) == 0) continue;
      struct stat st{};
      if (::lstat(p.c_str(), &st) != 0) continue;
      out[p] = std::to_string(st.st_mode) + " " + std::to_string(st.st_size) + " " +
               std::to_string(st.st_uid) + ":" + std::to_string(st.st_gid) + " " +
               std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
    }
  }
  return out;
}

class fuzz_context : public modules::minion_context {
 public:
  explicit fuzz_context(const modules::registry& functions) : functions_(functions) {
    opts_ = {{"id", "fuzz"},
             {"file_client", "local"},
             {"file_roots", {{"base", {"/mnt/srv/salt"}}}},
             {"cachedir", "/mnt/var/cache/brine"},
             {"test", false}};
  }
  const std::string& id() const override { return id_; }
  std::shared_ptr<const nlohmann::json> grains() const override { return grains_; }
  std::shared_ptr<const nlohmann::json> pillar() const override { return pillar_; }
  const nlohmann::json& opts() const override { return opts_; }
  std::string grains_file() const override { return "/mnt/etc/brine/grains"; }
  const modules::registry& functions() const override { return functions_; }
  void refresh_grains() override {}
  bool refresh_pillar(std::string& why) override {
    why = "fuzzing";
    return false;
  }
  std::vector<modules::running_job> running() const override { return {}; }
  bool kill_job(const std::string&) override { return false; }

 private:
  std::string id_ = "fuzz";
  std::shared_ptr<const nlohmann::json> grains_ = std::make_shared<const nlohmann::json>(
      nlohmann::json{{"id", "fuzz"}, {"os", "Debian"}, {"os_family", "Debian"}});
  std::shared_ptr<const nlohmann::json> pillar_ =
      std::make_shared<const nlohmann::json>(nlohmann::json{{"x", "y"}, {"l", {1, 2}}});
  nlohmann::json opts_;
  const modules::registry& functions_;
};

struct world {
  states::registry states;
  modules::registry functions;  // the instant ones only
  std::vector<std::string> names;
  std::unique_ptr<fuzz_context> context;

  world() {
    states::register_builtin_states(states);
    modules::registry all;
    modules::register_builtin_modules(all);
    for (const std::string& n : all.names()) {
      if (all.instant(n)) functions.add(n, *all.find(n), all.doc(n), modules::registry::kind::instant);
    }
    names = states.names();
    context = std::make_unique<fuzz_context>(functions);
  }
};

world* the_world = nullptr;

// Retries wait between attempts (Salt's retry interval and splay) on real
// timers: keep them short so an input cannot stall the fuzzer.
void bound_retry(json& chunk) {
  auto it = chunk.find("retry");
  if (it == chunk.end() || !it->is_object()) return;
  (*it)["interval"] = 0;
  (*it)["splay"] = 0;
  auto a = it->find("attempts");
  if (a != it->end() && (!a->is_number_integer() || *a > 3)) *a = 3;
}

json make_chunk(const json& args, size_t index, uint8_t pick) {
  const std::string& full = the_world->names[(pick + index) % the_world->names.size()];
  json low = json::object();
  low["state"] = full.substr(0, full.find('.'));
  low["__id__"] = "fz" + std::to_string(index);
  low["name"] = "/mnt/tmp/fz" + std::to_string(index);
  low["__sls__"] = "fz";
  low["__env__"] = "base";
  low["fun"] = full.substr(full.find('.') + 1);
  low["order"] = 10000 + static_cast<int>(index);
  if (args.is_object()) {
    for (auto& [k, v] : args.items()) low[k] = v;
  }
  bound_retry(low);
  return low;
}

void check_return(const json& running, const std::string& input) {
  if (running.is_array()) return;  // verify_data's errors (state.single)
  if (!running.is_object()) {
    std::fprintf(stderr, "run returned %s for %s\n", running.dump().c_str(), input.c_str());
    std::abort();
  }
  std::set<int64_t> seen;
  for (auto& [tag, ret] : running.items()) {
    // Salt's test.mod_watch returns the changes= it was given as they are
    // (`changes: true` stays True), as brine does.
    const bool given_changes = tag.starts_with("test_|-") && tag.ends_with("_|-mod_watch");
    bool ok = ret.is_object() && ret.contains("name") && ret.contains("comment") &&
              ret.contains("changes") && (ret["changes"].is_object() || given_changes) &&
              ret.contains("result") &&
              (ret["result"].is_boolean() || ret["result"].is_null());
    auto num = ret.is_object() ? ret.find("__run_num__") : ret.end();
    // Salt's give-up after 20 rounds of an unmet prereq reports the current
    // run number without taking it, so the next state shares it: only those
    // may.
    const bool gave_up = ok && ret["comment"] == "Recursive requisite found";
    ok = ok && num != ret.end() && num->is_number_integer() && *num >= 0 &&
         (gave_up || seen.insert(num->get<int64_t>()).second);
    if (!ok) {
      std::fprintf(stderr, "state %s returned %s for %s\n", tag.c_str(), ret.dump().c_str(),
                   input.c_str());
      std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  enter_sandbox(*argc, *argv);
  the_world = new world();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint8_t pick = data[0];
  const uint8_t mode = data[1];
  const std::string text(reinterpret_cast<const char*>(data) + 2, size - 2);
  json input = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (input.is_discarded()) return 0;
  json chunks = json::array();
  if (input.is_array()) {
    for (size_t i = 0; i < input.size() && i < 16; ++i) chunks.push_back(make_chunk(input[i], i, pick));
  } else {
    chunks.push_back(make_chunk(input, 0, pick));
  }
  const bool test = (mode & 1) != 0;

  wipe_files();
  seed_files();
  const auto before = test ? snapshot() : std::map<std::string, std::string>();

  apply::settings s;
  s.states = &the_world->states;
  s.functions = &the_world->functions;
  s.context = the_world->context.get();
  s.test = test;
  s.jid = "20261127000000000000";
  s.timeout = std::chrono::seconds(10);
  apply::runner r(s);
  asio::io_context io;
  json running;
  std::exception_ptr failure;
  auto done = [&](std::exception_ptr e, json ret) {
    failure = e;
    running = std::move(ret);
  };
  if ((mode & 2) != 0) {
    asio::co_spawn(io, r.run_single(chunks[0]), done);
  } else if ((mode & 4) != 0) {
    asio::co_spawn(io, r.run_id(chunks, "fz0"), done);
  } else {
    asio::co_spawn(io, r.run(chunks), done);
  }
  io.run();
  if (failure) {
    try {
      std::rethrow_exception(failure);
    } catch (const base::error&) {
      // A run-level error Salt raises too (a requisite that is not text:
      // "Could not locate requisite of [...]"): the job reports it.
      return 0;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "the run threw: %s\ninput: %s\n", e.what(), chunks.dump().c_str());
    }
    std::abort();
  }
  check_return(running, chunks.dump());
  if (test && snapshot() != before) {
    std::fprintf(stderr, "test=True changed the file system: %s\n", chunks.dump().c_str());
    std::abort();
  }
  return 0;
}
