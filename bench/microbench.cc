// brine_microbench: in-process figures of the master's targeting and pillar
// compilation, for bench/run.py. Prints one JSON object per line on stdout
// (every sample, in ms or minions per second, so the caller computes
// min/median/max); progress and failures go to stderr. Exits 1 when a figure
// measures nothing (an expression that targets no minion, a pillar with
// errors): a benchmark that hides that is worse than none.
//
// Targeting: N cached minions (default 10,000) whose grains are Salt 3006's
// own grain sets for Debian 12, Ubuntu 22.04 and Rocky 9 (the fixtures in
// src/grains/tests/fixtures/expected; --grains-dir for others), each with its own id,
// addresses, machine id, roles and environment; every expression is parsed
// and then matched against all of them through target::match, as a publish
// is. Pillar: a tree of 10 sls files in a top file with glob, grain,
// compound, list, pcre, ipcidr and nodegroup targets (plus one sls included),
// loaded, then compiled for every minion with compile() and compile_shared().
//
//   cmake --preset release && cmake --build --preset release --target brine_microbench
//
// States: the `bench` tree of tests/fixtures/states (111 states, 5 sls,
// templates, pillar) rendered and compiled to Salt's lowstate for a Debian 12
// minion, CPU per catalog; the heap a compiled catalog keeps; templates
// rendered per second over the fixture trees.
//
// Compile masters: catalogs per CPU second on one thread, cold, warm and
// from the catalog cache, and the cache's memory per minion (bench_catalog).
//
//   build/release/bench/brine_microbench [--rounds N] [--pillar-rounds N] [--only
//   target|pillar|state|metrics|catalog]
//     [--filter TEXT]   (only the target expressions containing TEXT: for perf record)
#include <malloc.h>
#include <time.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/yaml_json.h"
#include "catalog/service.h"
#include "fileserver/roots.h"
#include "metrics/metrics.h"
#include "modules/registry.h"
#include "pillar/pillar.h"
#include "state/bridge.h"
#include "state/highstate.h"
#include "support/temp_dir.h"
#include "target/target.h"

namespace {

using nlohmann::json;
namespace pillar = brine::pillar;
namespace target = brine::target;
namespace packed = brine::packed;
using clock_type = std::chrono::steady_clock;

double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

struct options {
  size_t minions = 10000;
  int rounds = 20;        // matches of each target expression
  int pillar_rounds = 3;  // loads, and passes over all minions per compile method
  std::string only;       // "", "target" or "pillar"
  std::string filter;     // only target expressions containing this (for a profiler)
  std::string grains_dir = BRINE_GRAIN_TEMPLATES;
};

// A master's grains cache: every minion's grains, walked in id order as the
// master walks its own storage.
class fleet : public target::cache_view {
 public:
  struct entry {
    std::string id;
    packed::document grains;  // as the master's cache keeps them
  };

  fleet(size_t n, const std::string& grains_dir) {
    // The mix of a typical estate: half Debian, a third Ubuntu, the rest Rocky.
    std::vector<json> templates;
    for (const char* name : {"debian-12", "ubuntu-22", "rocky-9"}) {
      templates.push_back(
          brine::base::yaml_to_json(YAML::LoadFile(grains_dir + "/" + name + ".yaml")));
    }
    std::mt19937 rng(42);
    const char* roles[] = {"web", "db", "app", "cache"};
    for (size_t i = 0; i < n; ++i) {
      size_t decile = i % 10;
      json g = templates[decile < 5 ? 0 : decile < 8 ? 1 : 2];
      std::string role = roles[rng() % 4];
      char id[32];
      std::snprintf(id, sizeof id, "%s%05zu", role.c_str(), i);
      std::string ip = "10." + std::to_string(i / 65536 % 256) + "." +
                       std::to_string(i / 256 % 256) + "." + std::to_string(i % 256);
      char ip6[40], mac[24], machine_id[40];
      std::snprintf(ip6, sizeof ip6, "fd00::%zx", i);
      std::snprintf(mac, sizeof mac, "52:54:00:%02zx:%02zx:%02zx", i >> 16 & 0xff, i >> 8 & 0xff,
                    i & 0xff);
      std::snprintf(machine_id, sizeof machine_id, "%032zx", i * 2654435761u);
      g["id"] = g["host"] = g["localhost"] = g["nodename"] = id;
      g["domain"] = "dc1.example.com";
      g["fqdn"] = std::string(id) + ".dc1.example.com";
      g["fqdn_ip4"] = {ip};
      g["ipv4"] = {ip, "127.0.0.1"};
      g["ipv6"] = {"::1", ip6};
      g["ip4_interfaces"] = {{"eth0", {ip}}, {"lo", {"127.0.0.1"}}};
      g["ip6_interfaces"] = {{"eth0", {ip6}}, {"lo", {"::1"}}};
      g["ip_interfaces"] = {{"eth0", {ip, ip6}}, {"lo", {"127.0.0.1", "::1"}}};
      g["hwaddr_interfaces"] = {{"eth0", mac}, {"lo", "00:00:00:00:00:00"}};
      g["machine_id"] = machine_id;
      g["num_cpus"] = 2 << (rng() % 4);
      g["mem_total"] = 3915 << (rng() % 4);
      // Custom grains, as a grains file or a grains module sets them.
      g["roles"] = {role, "monitored"};
      g["environment"] = i % 3 ? "production" : "staging";
      minions_.push_back({id, packed::document(g)});
    }
    std::sort(minions_.begin(), minions_.end(),
              [](const entry& a, const entry& b) { return a.id < b.id; });
  }

  void for_each(const visitor& fn) const override {
    for (const auto& m : minions_) fn(m.id, {m.grains.root(), {}});
  }
  const std::vector<entry>& minions() const { return minions_; }

  // Every `step`-th id (in id order), `count` of them, joined by `sep`.
  std::string ids(size_t count, size_t step, char sep) const {
    std::string out;
    for (size_t k = 0; k < count && k * step < minions_.size(); ++k) {
      if (k > 0) out += sep;
      out += minions_[k * step].id;
    }
    return out;
  }

 private:
  std::vector<entry> minions_;
};

void emit(const json& line) { std::cout << line.dump() << '\n' << std::flush; }

int bench_targets(const fleet& f, const options& o) {
  const size_t n = f.minions().size();
  const target::nodegroups groups = {
      {"debian_web", std::string("G@os_family:Debian and G@roles:web")},
      {"prod_debian_web", std::string("N@debian_web and not G@environment:staging")},
  };
  // `label`: the name of its figure in bench/run.py's table (short, stable).
  struct bench {
    std::string text;
    target::type kind;
    std::string label;
  };
  const size_t listed = std::min<size_t>(100, n);
  const std::vector<bench> benches = {
      {"web*", target::type::glob, "glob web*"},
      {"*1?3", target::type::glob, "glob *1?3"},
      {"(web|db)\\d+0$", target::type::pcre, "pcre (web|db)\\d+0$"},
      {f.ids(listed, n / listed, ','), target::type::list,
       "list of " + std::to_string(listed) + " ids"},
      {"os:Debian", target::type::grain, "grain os:Debian"},
      {"os_family:deb*", target::type::grain, "grain os_family:deb*"},
      {"ip_interfaces:eth0:10.0.1*", target::type::grain, "grain ip_interfaces:eth0:10.0.1*"},
      // Salt's `*:` walks every grain of every minion.
      {"*:eth0:10.0.1*", target::type::grain, "grain *:eth0:10.0.1* (all grains)"},
      {"os:(debian|ubuntu)", target::type::grain_pcre, "grain_pcre os:(debian|ubuntu)"},
      {"10.0.0.0/21", target::type::ipcidr, "ipcidr 10.0.0.0/21"},
      {"G@os:Debian and not L@m1,m2 or E@web\\d+", target::type::compound,
       "compound G@ and not L@ or E@"},
      {"( G@roles:web or G@roles:db ) and not ( G@environment:staging or G@os:Rocky )",
       target::type::compound, "compound (G@ or G@) and not (G@ or G@)"},
      {"prod_debian_web", target::type::nodegroup, "nodegroup N@ and not G@ (3 grains)"},
  };

  // The floor: one lookup of a top-level grain per minion (a binary search
  // in each minion's packed grains: memory latency, not matching).
  {
    std::vector<double> samples;
    size_t found = 0;
    for (int r = 0; r < o.rounds; ++r) {
      auto t0 = clock_type::now();
      found = 0;
      f.for_each([&](const std::string&, const target::minion_data& d) {
        packed::value os = d.grains.find("os");
        found += os && os.string() == "Debian";
      });
      samples.push_back(ms_since(t0));
    }
    emit({{"bench", "target_floor"},
          {"expr", "grains.find(\"os\") == \"Debian\""},
          {"minions", n},
          {"matched", found},
          {"match_ms", samples}});
  }

  int failures = 0;
  for (const auto& b : benches) {
    if (b.text.find(o.filter) == std::string::npos) continue;
    std::vector<double> parse, match;
    target::match_result result;
    for (int r = 0; r < std::max(o.rounds, 10); ++r) {
      auto t0 = clock_type::now();
      auto e = target::expression::parse(b.text, b.kind, groups);
      parse.push_back(ms_since(t0));
    }
    auto e = target::expression::parse(b.text, b.kind, groups);
    for (int r = 0; r < o.rounds; ++r) {
      auto t0 = clock_type::now();
      result = target::match(e, f);
      match.push_back(ms_since(t0));
    }
    emit({{"bench", "target"},
          {"type", target::type_name(b.kind)},
          {"label", b.label},
          {"expr", b.text},
          {"minions", n},
          {"matched", result.minions.size()},
          {"missing", result.missing.size()},
          {"parse_ms", parse},
          {"match_ms", match}});
    bool wrong =
        result.minions.empty() || (b.kind == target::type::list &&
                                   (result.minions.size() != listed || !result.missing.empty()));
    if (wrong) {
      std::cerr << "brine_microbench: target " << b.label << " matched " << result.minions.size()
                << " of " << n << " minions (" << result.missing.size()
                << " missing): the fleet or the matcher is broken\n";
      ++failures;
    }
  }
  return failures;
}

// Heap bytes per minion of its grains as an nlohmann tree and packed (what
// the master's cache keeps), over the first 1,000 minions of the fleet.
void bench_grains_memory(const fleet& f) {
  const size_t n = std::min<size_t>(1000, f.minions().size());
  auto heap = [] { return static_cast<double>(mallinfo2().uordblks); };
  std::vector<json> trees;
  trees.reserve(n);
  double t0 = heap();
  for (size_t i = 0; i < n; ++i) trees.push_back(f.minions()[i].grains.to_json());
  double tree_bytes = (heap() - t0) / static_cast<double>(n);
  std::vector<packed::document> docs;
  docs.reserve(n);
  t0 = heap();
  for (const auto& t : trees) docs.emplace_back(t);
  double packed_bytes = (heap() - t0) / static_cast<double>(n);
  emit({{"bench", "grains_memory"},
        {"minions", n},
        {"tree_bytes_per_minion", tree_bytes},
        {"packed_bytes_per_minion", packed_bytes}});
}

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

// The top file names the 10 sls files below (web includes web.tls, common
// includes users, which the top file names too).
pillar::options write_pillar_tree(const std::string& root, const fleet& f) {
  const size_t n = f.minions().size();
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
  ')" + f.ids(std::min<size_t>(100, n), std::max<size_t>(1, n / 100), ',') +
                               R"(':
    - match: list
    - special
  '^cache\d+$':
    - match: pcre
    - cache
  '10.0.0.0/21':
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
  pillar::options opts;
  opts.roots = {{"base", {root}}};
  opts.groups = {{"monitored", std::string("G@os:Debian and G@roles:web")}};
  return opts;
}

int bench_pillar(const fleet& f, const options& o) {
  brine::test::temp_dir dir{"brine-microbench"};
  pillar::options opts = write_pillar_tree(dir.file("base"), f);
  const auto& minions = f.minions();
  const double n = static_cast<double>(minions.size());

  std::vector<double> load_ms, first_pass, copied, shared;
  size_t keys = 0, errors = 0;
  std::string first_error;
  auto note = [&](const pillar::compiler::result& r) {
    keys += r.pillar.size();
    errors += r.errors.size();
    if (!r.errors.empty() && first_error.empty()) first_error = r.errors.front();
  };
  for (int round = 0; round < o.pillar_rounds; ++round) {
    auto t0 = clock_type::now();
    pillar::compiler c = pillar::compiler::load(opts);
    load_ms.push_back(ms_since(t0));

    // After a load no result is cached yet: each distinct set of matched
    // targets is merged once here.
    t0 = clock_type::now();
    for (const auto& m : minions) note(*c.compile_shared(m.id, m.grains.root()));
    first_pass.push_back(n / (ms_since(t0) / 1000));

    t0 = clock_type::now();
    for (const auto& m : minions) {
      pillar::compiler::result copy = *c.compile_shared(m.id, m.grains.root());
      note(copy);
    }
    copied.push_back(n / (ms_since(t0) / 1000));

    t0 = clock_type::now();
    for (const auto& m : minions) note(*c.compile_shared(m.id, m.grains.root()));
    shared.push_back(n / (ms_since(t0) / 1000));
  }
  emit({{"bench", "pillar_load"}, {"sls", 11}, {"ms", load_ms}});
  emit({{"bench", "pillar_compile"},
        {"method", "compile_shared, first pass after load"},
        {"minions", minions.size()},
        {"minions_per_s", first_pass}});
  emit({{"bench", "pillar_compile"},
        {"method", "compile"},
        {"minions", minions.size()},
        {"minions_per_s", copied}});
  emit({{"bench", "pillar_compile"},
        {"method", "compile_shared"},
        {"minions", minions.size()},
        {"minions_per_s", shared}});
  if (errors > 0 || keys == 0) {
    std::cerr << "brine_microbench: pillar: " << errors << " errors (first: " << first_error
              << "), " << keys << " top-level keys in all\n";
    return 1;
  }
  return 0;
}

double cpu_ms_now() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

// One minion of a state tree of tests/fixtures/states, as the fixtures were
// recorded: id minion1, the tree's pillar compiled for it, file_client local.
struct state_minion {
  brine::state::options opts;
  brine::state::minion minion;
};

state_minion fixture_minion(const std::filesystem::path& tree, const json& grains) {
  state_minion sm;
  sm.opts.file_roots = {{"base", {(tree / "salt").string()}}};
  if (std::filesystem::exists(tree / "salt-dev")) {
    sm.opts.file_roots.push_back({"dev", {(tree / "salt-dev").string()}});
  }
  pillar::options po;
  po.roots = {{"base", {(tree / "pillar").string()}}};
  auto pr = pillar::compiler::load(po).compile("minion1", &grains);
  json opts = {{"id", "minion1"}, {"file_client", "local"}};
  for (const auto& [env, dirs] : sm.opts.file_roots) opts["file_roots"][env] = dirs;
  opts["pillar_roots"]["base"] = {(tree / "pillar").string()};
  sm.minion.id = "minion1";
  sm.minion.grains = brine::state::json(grains);
  // As salt-call --local has it: Salt's key order, its YAML renderer's
  // OrderedDicts below the top.
  sm.minion.pillar = std::move(pr.ordered);
  sm.minion.pillar_ordered_dicts = true;
  sm.minion.opts = brine::state::json(opts);
  return sm;
}

// The state compiler: render and compile of the `bench` tree (111 states in
// 5 sls with map.jinja, a macro and pillar loops) for a Debian 12 minion,
// CPU per catalog, as Salt's state.show_lowstate does it; the heap a
// compiled catalog (its lowstate) keeps; and templates rendered per second
// (slsutil.renderer of every sls of the fixture trees).
// The master's hot-path figures: ns per counter increment and histogram
// observation with 1 and 2 threads at once (the machine's cores), against
// one std::atomic that every thread adds to (what the figures replace: the
// master's old returns counter).
void bench_metrics(const options& o) {
  auto per_op_ns = [](int threads, const std::function<void()>& op) {
    constexpr int k_ops = 2000000;
    std::vector<std::thread> ts;
    auto t0 = clock_type::now();
    for (int t = 0; t < threads; ++t) {
      ts.emplace_back([&op] {
        for (int i = 0; i < k_ops; ++i) op();
      });
    }
    for (auto& t : ts) t.join();
    return ms_since(t0) * 1e6 / k_ops;  // wall per op of one thread
  };
  brine::metrics::registry r;
  auto& counter = r.add_counter("brine_bench_total", "bench");
  auto& hist = r.add_histogram("brine_bench_seconds", "bench", brine::metrics::seconds_buckets());
  std::atomic<uint64_t> shared{0};
  for (int threads : {1, 2}) {
    json c = json::array(), h = json::array(), a = json::array();
    for (int round = 0; round < o.rounds; ++round) {
      c.push_back(per_op_ns(threads, [&counter] { counter.inc(); }));
      h.push_back(per_op_ns(threads, [&hist] { hist.observe(0.003); }));
      a.push_back(per_op_ns(threads, [&shared] { shared.fetch_add(1); }));
    }
    emit({{"bench", "metrics"},
          {"threads", threads},
          {"counter_ns", c},
          {"histogram_ns", h},
          {"shared_atomic_ns", a}});
  }
  if (counter.value() == 0 || hist.read().count() == 0 || shared == 0) {
    std::cerr << "brine_microbench: the metrics counted nothing\n";
  }
}

int bench_states(const options& o) {
  namespace fs = std::filesystem;
  const fs::path root = BRINE_STATE_FIXTURES;
  json grains = brine::base::yaml_to_json(YAML::LoadFile(o.grains_dir + "/debian-12.yaml"));
  brine::modules::registry reg;
  brine::modules::register_builtin_modules(reg);
  auto heap = [] { return static_cast<double>(mallinfo2().uordblks); };

  state_minion bench = fixture_minion(root / "bench", grains);
  size_t chunks = 0;
  std::vector<double> cpu, wall;
  const int catalogs = std::max(10, o.rounds * 5);
  std::vector<brine::state::json> kept;
  kept.reserve(static_cast<size_t>(catalogs));
  double heap0 = heap();
  for (int i = 0; i < catalogs; ++i) {
    double c0 = cpu_ms_now();
    auto t0 = clock_type::now();
    brine::state::compiler c(bench.opts, bench.minion);
    c.set_salt(brine::state::make_salt(c, reg, nullptr));
    auto r = c.show_lowstate();
    wall.push_back(ms_since(t0));
    cpu.push_back(cpu_ms_now() - c0);
    if (r.retcode != 0 || !r.ret.is_array()) {
      std::cerr << "brine_microbench: state: the bench tree failed to compile: "
                << r.ret.dump().substr(0, 500) << "\n";
      return 1;
    }
    chunks = r.ret.size();
    kept.push_back(std::move(r.ret));
  }
  double kept_bytes = (heap() - heap0) / static_cast<double>(kept.size());
  emit({{"bench", "state_compile"},
        {"tree", "bench"},
        {"chunks", chunks},
        {"cpu_ms", cpu},
        {"wall_ms", wall},
        {"catalog_bytes", kept_bytes}});
  // Cold: the caches compiles share (parsed templates, the YAML of rendered
  // texts) emptied before each catalog, as a process's first compile is.
  std::vector<double> cold;
  for (int i = 0; i < catalogs / 2; ++i) {
    brine::state::forget_compile_caches();
    double c0 = cpu_ms_now();
    brine::state::compiler c(bench.opts, bench.minion);
    c.set_salt(brine::state::make_salt(c, reg, nullptr));
    auto r = c.show_lowstate();
    cold.push_back(cpu_ms_now() - c0);
    if (r.retcode != 0) return 1;
  }
  emit({{"bench", "state_compile_cold"}, {"tree", "bench"}, {"chunks", chunks}, {"cpu_ms", cold}});

  // Every sls file of the fixture trees through slsutil.renderer.
  size_t rendered = 0, failed = 0;
  double seconds = 0;
  for (const auto& entry : fs::directory_iterator(root)) {
    if (!fs::is_directory(entry) || entry.path().filename() == "errors") continue;
    state_minion sm = fixture_minion(entry.path(), grains);
    // salt://path and the sls and tpldir it renders with, as a state run
    // renders it (slsutil.renderer alone would give tpldir '.').
    std::vector<std::pair<std::string, brine::state::json>> files;
    for (const auto& [env, dirs] : sm.opts.file_roots) {
      if (env != "base") continue;
      for (const auto& f : fs::recursive_directory_iterator(dirs.at(0))) {
        if (f.path().extension() != ".sls" || f.path().filename() == "top.sls") continue;
        std::string rel = f.path().lexically_relative(dirs.at(0)).generic_string();
        std::string sls = rel.substr(0, rel.size() - 4);
        if (sls.ends_with("/init")) sls.resize(sls.size() - 5);
        std::replace(sls.begin(), sls.end(), '/', '.');
        std::string dir = rel.find('/') == std::string::npos ? "." : rel.substr(0, rel.rfind('/'));
        files.push_back({"salt://" + rel, {{"sls", sls}, {"tpldir", dir}}});
      }
    }
    brine::state::compiler c(sm.opts, sm.minion);
    c.set_salt(brine::state::make_salt(c, reg, nullptr));
    for (int round = 0; round < o.rounds; ++round) {
      for (const auto& [f, kwargs] : files) {
        auto t0 = clock_type::now();
        auto r = c.renderer(f, "jinja|yaml", kwargs);
        seconds += ms_since(t0) / 1000;
        (r.retcode == 0 ? rendered : failed) += 1;
      }
    }
  }
  emit({{"bench", "template_render"},
        {"templates", rendered},
        {"failed", failed},
        {"templates_per_s", seconds > 0 ? static_cast<double>(rendered) / seconds : 0.0}});
  return rendered == 0 ? 1 : 0;
}

int usage(const char* argv0) {
  std::cerr << "usage: " << argv0
            << " [--minions N] [--rounds N] [--pillar-rounds N] [--only "
               "target|pillar|state|metrics|catalog]"
               " [--filter TEXT] [--grains-dir DIR]\n";
  return 2;
}

}  // namespace

// Compile masters: the catalog service over the bench tree (a roots
// backend, as a master's file_roots) for `minions` Debian 12 minions of one
// role (their ids differ, their chunks do not), on one thread: the CPU of a
// catalog compiled cold (the catalog cache and the compile caches emptied
// first), of one compiled on a miss with warm compile caches, and of a hit
// (the saltenvs' revisions read, the key hashed, the cached catalog
// decoded); the cache's bytes per minion when minions share a catalog, and
// the size of one catalog (what a minion costs when its catalog is its own).
int bench_catalog(const options& o) {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(BRINE_STATE_FIXTURES) / "bench";
  json grains = brine::base::yaml_to_json(YAML::LoadFile(o.grains_dir + "/debian-12.yaml"));
  state_minion sm = fixture_minion(root, grains);
  brine::test::temp_dir tmp("brine-bench-catalog");
  std::map<std::string, std::vector<std::string>> file_roots;
  for (const auto& [env, dirs] : sm.opts.file_roots) file_roots[env] = dirs;
  brine::fileserver::roots files(file_roots, std::chrono::milliseconds(0));
  brine::catalog::settings s;
  s.tree_dir = tmp.path() + "/tree";
  s.threads = 1;
  brine::catalog::service svc(s, files);
  auto request_for = [&](size_t i) {
    brine::catalog::request r;
    r.fun = "state.apply";
    std::string id = "minion" + std::to_string(i);
    r.grains = grains;
    r.grains["id"] = id;
    r.pillar = sm.minion.pillar;
    r.pillar_compiled_here = true;
    r.opts = {{"id", id}, {"file_client", "remote"}};
    return r;
  };
  const size_t n = std::min<size_t>(o.minions, 1000);
  std::vector<brine::catalog::request> requests;
  for (size_t i = 0; i < n; ++i) requests.push_back(request_for(i));
  auto check = [](const brine::catalog::service::answer& a, bool hit) {
    if (a.body.value("kind", "") != "chunks" || a.hit != hit) {
      throw std::runtime_error("catalog: the bench tree did not compile as expected: " +
                               a.body.dump().substr(0, 300));
    }
  };
  std::vector<double> cold;
  for (int i = 0; i < std::max(5, o.rounds / 2); ++i) {
    svc.clear_cache();
    brine::state::forget_compile_caches();
    double c0 = cpu_ms_now();
    check(svc.compile_now("minion0", requests[0]), false);
    cold.push_back(cpu_ms_now() - c0);
  }
  svc.clear_cache();
  double c0 = cpu_ms_now();
  for (size_t i = 0; i < n; ++i)
    check(svc.compile_now("minion" + std::to_string(i), requests[i]), false);
  double miss_ms = cpu_ms_now() - c0;
  c0 = cpu_ms_now();
  for (size_t i = 0; i < n; ++i)
    check(svc.compile_now("minion" + std::to_string(i), requests[i]), true);
  double hit_ms = cpu_ms_now() - c0;
  auto counts = svc.cache_counts();
  auto one = svc.compile_now("minion0", requests[0]);
  size_t chunks = 0;
  std::string why;
  if (auto body = brine::catalog::reply_from_body(one.body, why)) chunks = body->chunks.size();
  double catalog_bytes =
      static_cast<double>(counts.bytes - counts.keys * brine::catalog::cache::k_key_overhead) /
      static_cast<double>(std::max<uint64_t>(counts.catalogs, 1));
  emit({{"bench", "catalog"},
        {"tree", "bench"},
        {"chunks", chunks},
        {"minions", n},
        {"cold_cpu_ms", cold},
        {"miss_cpu_ms", miss_ms / static_cast<double>(n)},
        {"hit_cpu_ms", hit_ms / static_cast<double>(n)},
        {"miss_per_core_s", static_cast<double>(n) / (miss_ms / 1000)},
        {"hit_per_core_s", static_cast<double>(n) / (hit_ms / 1000)},
        {"catalogs", counts.catalogs},
        {"cache_bytes_per_minion", static_cast<double>(counts.bytes) / static_cast<double>(n)},
        {"catalog_bytes", catalog_bytes}});
  return 0;
}

int main(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) return usage(argv[0]);
    std::string v = argv[++i];
    if (a == "--minions") {
      o.minions = std::strtoul(v.c_str(), nullptr, 10);
    } else if (a == "--rounds") {
      o.rounds = std::atoi(v.c_str());
    } else if (a == "--pillar-rounds") {
      o.pillar_rounds = std::atoi(v.c_str());
    } else if (a == "--only" && (v == "target" || v == "pillar" || v == "state" || v == "metrics" ||
                                 v == "catalog")) {
      o.only = v;
    } else if (a == "--filter") {
      o.filter = v;
    } else if (a == "--grains-dir") {
      o.grains_dir = v;
    } else {
      return usage(argv[0]);
    }
  }
  if (o.minions < 100 || o.rounds < 1 || o.pillar_rounds < 1) return usage(argv[0]);
  try {
    auto t0 = clock_type::now();
    fleet f(o.minions, o.grains_dir);
    std::cerr << "brine_microbench: " << o.minions << " minions' grains built in "
              << static_cast<int>(ms_since(t0)) << " ms\n";
    int failures = 0;
    if (o.only.empty() || o.only == "target") failures += bench_targets(f, o);
    if (o.only.empty() || o.only == "target") bench_grains_memory(f);
    if (o.only.empty() || o.only == "pillar") failures += bench_pillar(f, o);
    if (o.only.empty() || o.only == "state") failures += bench_states(o);
    if (o.only.empty() || o.only == "metrics") bench_metrics(o);
    if (o.only.empty() || o.only == "catalog") failures += bench_catalog(o);
    return failures > 0 ? 1 : 0;
  } catch (const std::exception& e) {
    std::cerr << "brine_microbench: " << e.what() << '\n';
    return 1;
  }
}
