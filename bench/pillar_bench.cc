// Pillar compilation on the master: a tree of 10 sls files (two with
// includes) and a top file with mixed targets (glob, grain, compound, list,
// pcre, ipcidr, nodegroup), compiled for 10,000 minions with varied grains.
// Prints minions per second (items_per_second) for one and for two threads
// sharing one compiler (the argument), and the load time of the tree.
//
//   cmake --preset release && cmake --build --preset release --target pillar_bench
//   build/release/src/pillar/pillar_bench
#include <benchmark/benchmark.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "pillar/pillar.h"
#include "support/temp_dir.h"

namespace {

using nlohmann::json;
namespace pillar = brine::pillar;

constexpr int k_minions = 10000;

void write(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

// A block of `n` nested settings under `name`, so files hold data of a
// realistic size (a few KiB each).
std::string settings(const std::string& name, int n) {
  std::string s = name + ":\n";
  for (int i = 0; i < n; ++i) {
    s += "  key" + std::to_string(i) + ":\n    value: v" + std::to_string(i) +
         "\n    enabled: yes\n    limit: " + std::to_string(i * 10) + "\n    tags: [a, b, c]\n";
  }
  return s;
}

std::string special_ids() {
  std::string ids;
  for (int i = 0; i < 100; ++i) {
    if (i > 0) ids += ',';
    ids.append("db").append(std::to_string(i * 7));
  }
  return ids;
}

struct fleet {
  brine::test::temp_dir dir{"brine-pillar-bench"};
  pillar::options opts;
  std::vector<std::string> ids;
  std::vector<json> grains;

  fleet() {
    std::string root = dir.file("base");
    write(root + "/top.sls", R"(base:
  '*':
    - common
    - users
  'web*':
    - web
  'G@os:Debian':
    - debian
  'os_family:RedHat':
    - match: grain
    - redhat
  'G@roles:db and not G@os:Windows':
    - db
  ')" + special_ids() + R"(':
    - match: list
    - special
  '^cache\d+$':
    - match: pcre
    - cache
  '10.1.0.0/16':
    - match: ipcidr
    - net
  'web* and G@roles:web or N@monitored':
    - monitoring
)");
    write(root + "/common.sls", "include:\n  - .users\n" + settings("common", 40));
    write(root + "/users.sls", settings("users", 30) + "admins: [alice, bob]\n");
    write(root + "/web/init.sls", "include:\n  - .tls\n" + settings("web", 20));
    write(root + "/web/tls.sls", settings("tls", 5));
    write(root + "/debian.sls", settings("apt", 10));
    write(root + "/redhat.sls", settings("yum", 10));
    write(root + "/db.sls", settings("postgres", 25));
    write(root + "/special.sls", settings("special", 5));
    write(root + "/cache.sls", settings("redis", 10));
    write(root + "/net.sls", settings("routes", 8));
    write(root + "/monitoring.sls", settings("checks", 15));
    opts.roots = {{"base", {root}}};
    opts.groups = {{"monitored", std::string("G@os:Debian and G@roles:web")}};

    const char* prefixes[] = {"web", "db", "cache", "mail"};
    const char* oses[][2] = {{"Debian", "Debian"}, {"Ubuntu", "Debian"}, {"Rocky", "RedHat"}};
    for (int i = 0; i < k_minions; ++i) {
      std::string prefix = prefixes[i % 4];
      ids.push_back(prefix + std::to_string(i));
      const auto& os = oses[i % 3];
      std::string ip = "10.";
      for (int octet : {i % 3, i / 256 % 256, i % 256}) {
        ip.append(std::to_string(octet)).push_back('.');
      }
      ip.pop_back();
      grains.push_back({{"id", ids.back()},
                        {"os", os[0]},
                        {"os_family", os[1]},
                        {"roles", json::array({prefix})},
                        {"num_cpus", 2 + i % 8},
                        {"ipv4", json::array({ip, "127.0.0.1"})}});
    }
  }
};

fleet& the_fleet() {
  static fleet f;
  return f;
}

void BM_Load(benchmark::State& state) {
  fleet& f = the_fleet();
  for (auto _ : state) benchmark::DoNotOptimize(pillar::compiler::load(f.opts));
}
BENCHMARK(BM_Load)->Unit(benchmark::kMillisecond);

const pillar::compiler& the_compiler() {
  static const pillar::compiler c = pillar::compiler::load(the_fleet().opts);
  return c;
}

// Each iteration compiles the pillar of all 10,000 minions, split among
// range(0) threads sharing one compiler; items_per_second is minions per
// second of wall time. compile() copies each result out (a few thousand JSON
// nodes per minion here); compile_shared() hands out the one result that
// minions matching the same targets share.
template <bool shared>
void BM_Compile(benchmark::State& state) {
  fleet& f = the_fleet();
  const pillar::compiler& c = the_compiler();
  const int threads = static_cast<int>(state.range(0));
  std::atomic<size_t> keys{0};
  std::atomic<int> errors{0};
  auto run = [&](int first) {
    size_t n = 0;
    for (int i = first; i < k_minions; i += threads) {
      if constexpr (shared) {
        auto r = c.compile_shared(f.ids[i], &f.grains[i]);
        errors += static_cast<int>(r->errors.size());
        n += r->pillar.size();
      } else {
        auto r = c.compile(f.ids[i], &f.grains[i]);
        errors += static_cast<int>(r.errors.size());
        n += r.pillar.size();
      }
    }
    keys += n;
  };
  for (auto _ : state) {
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(run, t);
    run(0);
    for (auto& th : pool) th.join();
  }
  if (errors > 0) state.SkipWithError("pillar errors");
  benchmark::DoNotOptimize(keys.load());
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * k_minions);
}
BENCHMARK(BM_Compile<false>)->Unit(benchmark::kMillisecond)->UseRealTime()->Arg(1)->Arg(2);
BENCHMARK(BM_Compile<true>)->Unit(benchmark::kMillisecond)->UseRealTime()->Arg(1)->Arg(2);

}  // namespace

BENCHMARK_MAIN();
