#include "swarm/swarm.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/redirect_error.hpp>
#include <asio/signal_set.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/strand.hpp>
#include <asio/use_awaitable.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>
#include <mutex>
#include <thread>

#include "apply/state_functions.h"
#include "base/error.h"
#include "base/fs.h"
#include "base/log.h"
#include "base/yaml_json.h"
#include "minion/context.h"
#include "minion/master_set.h"
#include "minion/scheduled_runs.h"
#include "schedule/scheduler.h"
#include "net/connection.h"
#include "state/state_mod.h"
#include "states/registry.h"
#include "swarm/sim_context.h"

namespace brine::swarm {
namespace {

using minion::agent_state;

// All seeds in one file, 32 bytes each, so that ten thousand keys load in
// milliseconds; grown (and rewritten) when a run asks for more.
std::vector<pki::keypair> load_keys(const std::string& dir, const std::string& prefix,
                                    uint32_t count) {
  base::ensure_dir(dir, 0700, "--keys-dir");
  std::string path = dir + "/" + prefix + "keys.bin";
  std::string seeds;
  if (base::file_exists(path)) {
    base::require_private(path);
    seeds = base::read_file(path);
    seeds.resize(seeds.size() / 32 * 32);
  }
  std::vector<pki::keypair> keys;
  keys.reserve(count);
  size_t have = std::min<size_t>(seeds.size() / 32, count);
  for (size_t i = 0; i < have; ++i) {
    keys.push_back(
        pki::keypair::from_seed(reinterpret_cast<const uint8_t*>(seeds.data()) + 32 * i));
  }
  if (have < count) {
    for (size_t i = have; i < count; ++i) {
      keys.push_back(pki::keypair::generate());
      seeds += keys.back().seed();
    }
    base::write_file_atomic(path, seeds, 0600);
    std::fprintf(stderr, "swarm: generated %zu keys into %s\n", count - have, path.c_str());
  }
  return keys;
}

// Raises the soft descriptor limit to the hard one; returns the new soft limit.
rlim_t raise_fd_limit() {
  struct rlimit rl {};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
  ::getrlimit(RLIMIT_NOFILE, &rl);
  return rl.rlim_cur;
}

// A simulated minion's best link: the one closest to serving.
agent_state best_of(const std::vector<std::pair<std::string, agent_state>>& links) {
  auto rank = [](agent_state s) {
    switch (s) {
      case agent_state::accepted:
        return 3;
      case agent_state::pending:
        return 2;
      case agent_state::refused:
        return 1;
      case agent_state::connecting:
        return 0;
    }
    return 0;
  };
  agent_state best = agent_state::connecting;
  for (const auto& [addr, st] : links) {
    if (rank(st) > rank(best)) best = st;
  }
  return best;
}

// When each publish reached the simulated minions. A jid is the master's UTC
// clock in microseconds at publish time, and the master runs on this machine,
// so receive time minus jid time is the publish latency.
class publish_tracker {
 public:
  explicit publish_tracker(uint32_t expected) : expected_(expected) {}
  void received(const std::string& jid) {
    int64_t now = std::chrono::duration_cast<std::chrono::microseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
    std::lock_guard lock(mu_);
    auto& e = jobs_[jid];
    if (e.count == 0) e.first = now;
    e.last = now;
    if (++e.count == expected_) {
      int64_t published = jid_micros(jid);
      std::printf("publish %s reached all %u minions: first after %.1f ms, last after %.1f ms\n",
                  jid.c_str(), expected_, static_cast<double>(e.first - published) / 1000,
                  static_cast<double>(e.last - published) / 1000);
      std::fflush(stdout);
      jobs_.erase(jid);
    }
  }

 private:
  static int64_t jid_micros(const std::string& jid) {
    if (jid.size() != 20) return 0;
    struct tm tm {};
    tm.tm_year = std::stoi(jid.substr(0, 4)) - 1900;
    tm.tm_mon = std::stoi(jid.substr(4, 2)) - 1;
    tm.tm_mday = std::stoi(jid.substr(6, 2));
    tm.tm_hour = std::stoi(jid.substr(8, 2));
    tm.tm_min = std::stoi(jid.substr(10, 2));
    tm.tm_sec = std::stoi(jid.substr(12, 2));
    return int64_t{::timegm(&tm)} * 1000000 + std::stoll(jid.substr(14, 6));
  }
  struct entry {
    uint32_t count = 0;
    int64_t first = 0;
    int64_t last = 0;
  };
  uint32_t expected_;
  std::mutex mu_;
  std::map<std::string, entry> jobs_;
};

// The master key, pinned by fingerprint or by the first key any simulated
// minion saw.
class shared_trust {
 public:
  explicit shared_trust(std::string finger) : finger_(std::move(finger)) {}
  bool operator()(EVP_PKEY* key, const std::string& where) {
    std::string fp = pki::fingerprint(key);
    std::lock_guard lock(mu_);
    if (finger_.empty()) {
      finger_ = fp;
      std::fprintf(stderr, "swarm: trusting master at %s on first use: %s\n", where.c_str(),
                   fp.c_str());
    }
    if (fp == finger_) return true;
    if (!said_) {
      said_ = true;
      std::fprintf(stderr, "swarm: master at %s presented fingerprint %s, expected %s; refusing\n",
                   where.c_str(), fp.c_str(), finger_.c_str());
    }
    return false;
  }

 private:
  std::mutex mu_;
  std::string finger_;
  bool said_ = false;
};

// Starts the minions at `rate` per second (all at once when 0).
asio::awaitable<void> start_minions(std::vector<std::unique_ptr<minion::master_set>>* sets,
                                    double rate) {
  auto executor = co_await asio::this_coro::executor;
  asio::steady_timer pace(executor);
  auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < sets->size(); ++i) {
    if (rate > 0) {
      pace.expires_at(start + std::chrono::microseconds(
                                  static_cast<int64_t>(static_cast<double>(i) * 1e6 / rate)));
      std::error_code ec;
      co_await pace.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
    (*sets)[i]->start();
  }
}

// What the simulated minions of a swarm that applies states share: their
// options (a real minion's defaults, with the swarm's masters), and one
// salt:// cache on disk.
std::unique_ptr<sim_shared> make_shared_part(const swarm_options& o,
                                             const std::vector<base::master_address>& masters,
                                             const modules::registry& functions) {
  base::minion_config cfg;
  cfg.source = o.keys_dir + "/" + o.id_prefix + "swarm";
  cfg.masters = masters;
  cfg.master_type =
      o.master_type == "failover" ? base::master_mode::failover : base::master_mode::hot;
  cfg.random_master = o.random_master;
  cfg.master_failback = o.master_failback;
  cfg.master_failback_interval = o.master_failback_interval;
  cfg.master_alive_interval = o.master_alive_interval;
  cfg.acceptance_wait_time = o.acceptance_wait_time;
  cfg.cachedir = o.keys_dir + "/" + o.id_prefix + "files";
  cfg.pki_dir = o.keys_dir;
  base::ensure_dir(cfg.cachedir, 0700, "--keys-dir");
  std::string grains_dir = cfg.cachedir + "/grains";
  base::ensure_dir(grains_dir, 0700, "--keys-dir");
  auto shared = std::make_unique<sim_shared>(
      sim_shared{functions, minion::opts_of(cfg),
                 std::make_shared<fileserver::file_cache>(cfg.cachedir + "/files"), grains_dir});
  shared->opts.erase("id");
  return shared;
}

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A state run without states: one succeeding state after `run_ms`, in
// Salt's return shape (what report::summarise reads).
struct simulated_state_run {
  uint32_t run_ms;

  asio::awaitable<modules::outcome> operator()(modules::call) const {
    auto t0 = std::chrono::system_clock::now();
    if (run_ms > 0) {
      asio::steady_timer timer(co_await asio::this_coro::executor,
                               std::chrono::milliseconds(run_ms));
      co_await timer.async_wait(asio::use_awaitable);
    }
    co_return modules::outcome{simulated_return(t0, run_ms)};
  }

  static nlohmann::json simulated_return(std::chrono::system_clock::time_point t0,
                                         uint32_t run_ms) {
    std::time_t secs = std::chrono::system_clock::to_time_t(t0);
    std::tm tm{};
    ::localtime_r(&secs, &tm);
    char start[32];
    std::strftime(start, sizeof start, "%H:%M:%S", &tm);
    nlohmann::json state = {{"name", "swarm"},
                            {"changes", nlohmann::json::object()},
                            {"result", true},
                            {"comment", "simulated by brine swarm"},
                            {"__id__", "swarm"},
                            {"__run_num__", 0},
                            {"__sls__", "swarm"},
                            {"start_time", std::string(start) + ".000000"},
                            {"duration", static_cast<double>(run_ms)}};
    return {{"test_|-swarm_|-swarm_|-succeed_without_changes", std::move(state)}};
  }
};

void register_simulated_state_runs(modules::registry& functions, uint32_t run_ms) {
  for (const char* name : {"state.apply", "state.highstate"}) {
    functions.add(name, simulated_state_run{run_ms},
                  "brine swarm: a simulated state run (one state, succeeding)");
  }
}

}  // namespace

int run_swarm(const swarm_options& o) {
  auto level = base::parse_log_level(o.log_level);
  if (!level) throw base::error("--log-level " + o.log_level + " is not a log level");
  spdlog::set_level(*level);
  if (o.keys_dir.empty()) throw base::error("--keys-dir is required (keys are cached there)");
  if (o.master_type != "str" && o.master_type != "failover") {
    throw base::error("--master-type must be str or failover, got " + o.master_type);
  }
  std::vector<base::master_address> masters;
  for (const auto& text : o.masters) {
    auto a = base::parse_master_address(text, 0);
    if (!a || a->port == 0) {
      throw base::error("--master takes HOST:PORT[,HOST:PORT...], got '" + text + "'");
    }
    masters.push_back(*a);
  }
  if (masters.empty()) throw base::error("--master needs at least one HOST:PORT");

  rlim_t fds = raise_fd_limit();
  uint64_t links = o.master_type == "failover" ? 1 : masters.size();
  if (o.count * links + 64 > fds) {
    throw base::error("--count " + std::to_string(o.count) + " needs more descriptors than the " +
                      "limit of " + std::to_string(fds) + "; run several swarm processes");
  }
  nlohmann::json grains = nlohmann::json::object();
  if (!o.grains_file.empty()) {
    try {
      grains = base::yaml_to_json(YAML::LoadFile(o.grains_file));
    } catch (const YAML::Exception& e) {
      throw base::error("--grains " + o.grains_file + ": " + e.what());
    }
    if (!grains.is_object()) throw base::error("--grains " + o.grains_file + ": not a YAML map");
  }
  auto t_keys = std::chrono::steady_clock::now();
  auto keys = load_keys(o.keys_dir, o.id_prefix, o.count);
  std::fprintf(stderr, "swarm: %u keys ready in %.2f s\n", o.count,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t_keys).count());

  asio::io_context io;
  net::tls_context tls(net::tls_context::role::client);
  // State functions first: the execution functions (state.apply) refer to
  // them.
  states::registry state_functions;
  modules::registry functions;
  std::unique_ptr<sim_shared> shared;
  if (o.states) {
    modules::register_builtin_modules(functions);
    state::register_state_module(functions);
    states::register_builtin_states(state_functions);
    apply::register_state_functions(functions, state_functions);
    shared = make_shared_part(o, masters, functions);
  } else {
    modules::register_test_module(functions);
    if (!o.schedule_function.empty()) register_simulated_state_runs(functions, o.schedule_run_ms);
  }
  shared_trust trust(o.master_finger);
  publish_tracker publishes(o.count);
  // Minions served now, and when all were (first, and again after a loss).
  std::atomic<int64_t> serving{0};
  std::atomic<bool> all_served{false};
  std::atomic<double> first_all_at{0};
  std::atomic<double> loss_at{0};  // when a served swarm first lost a minion
  std::mutex report_mu;
  std::vector<std::string> events;  // lines for the next report, in order
  // Set when the first minion starts: certificate making is not connecting.
  std::chrono::steady_clock::time_point t_start;
  auto since_start = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  };

  auto trust_fn = [&trust](EVP_PKEY* k, const std::string& w) { return trust(k, w); };
  // Counts the minions served, and says when all are (at first, and again
  // after losing a master).
  std::function<void(bool)> on_serving = [&](bool now_serving) {
    if (now_serving) {
      if (++serving != o.count) return;
      double t = since_start(), u = unix_seconds();
      std::lock_guard lock(report_mu);
      if (all_served.exchange(true)) return;
      if (first_all_at == 0) {
        first_all_at = t;
        events.push_back(
            fmt::format("all {} connected after {:.3f} s (unix {:.3f})", o.count, t, u));
      } else {
        events.push_back(
            fmt::format("all {} serving again {:.3f} s after the first loss (unix {:.3f})", o.count,
                        t - loss_at.load(), u));
      }
      return;
    }
    --serving;
    std::lock_guard lock(report_mu);
    if (all_served.exchange(false)) {
      loss_at = since_start();
      events.push_back(fmt::format("lost a master: {} of {} serving at unix {:.3f}", serving.load(),
                                   o.count, unix_seconds()));
    }
  };

  std::vector<std::unique_ptr<net::tls_identity>> identities;
  std::vector<std::unique_ptr<minion::memory_spool>> spools;
  std::vector<std::unique_ptr<minion::jid_history>> histories;
  // Before the sets, so that the sets (whose jobs use them) go first.
  std::vector<std::unique_ptr<sim_context>> contexts;  // with `states` only
  std::vector<std::unique_ptr<minion::master_set>> sets;
  std::vector<std::shared_ptr<schedule::scheduler>> schedulers;  // with a schedule only
  std::vector<base::schedule_job> schedule_jobs;
  if (!o.schedule_function.empty()) {
    base::schedule_job j;
    j.name = "swarm";
    j.function = o.schedule_function;
    j.seconds = o.schedule_seconds;
    schedule_jobs.push_back(std::move(j));
  }
  identities.reserve(o.count);
  // The links' hooks point into it: no reallocation.
  schedulers.reserve(schedule_jobs.empty() ? 0 : o.count);
  contexts.reserve(shared ? o.count : 0);
  spools.reserve(o.count);
  histories.reserve(o.count);
  sets.reserve(o.count);
  int width = static_cast<int>(std::to_string(o.count).size());
  for (uint32_t i = 0; i < o.count; ++i) {
    char num[16];
    std::snprintf(num, sizeof num, "%0*u", width, i + 1);
    minion::master_set_settings s;
    s.link.id = o.id_prefix + num;
    s.link.source = "brine swarm";
    s.link.acceptance_wait_time = std::chrono::seconds(o.acceptance_wait_time);
    s.link.master_alive_interval = std::chrono::seconds(o.master_alive_interval);
    if (!o.source_addresses.empty()) {
      s.link.source_address = o.source_addresses[i % o.source_addresses.size()];
    }
    s.masters = masters;
    s.mode = o.master_type == "failover" ? base::master_mode::failover : base::master_mode::hot;
    s.random_master = o.random_master;
    s.master_failback = o.master_failback;
    s.master_failback_interval = std::chrono::seconds(o.master_failback_interval);
    identities.push_back(std::make_unique<net::tls_identity>(keys[i], s.link.id));
    spools.push_back(std::make_unique<minion::memory_spool>());
    // A simulated minion remembers its recent jids only: enough to ignore
    // repeats of running and just-finished jobs.
    histories.push_back(std::make_unique<minion::jid_history>("", 1, 256));
    minion::agent::deps link{
        tls,     identities.back().get(), functions, *spools.back(), *histories.back(), nullptr,
        trust_fn};
    link.on_publish = [&publishes](const std::string& jid) { publishes.received(jid); };
    grains["id"] = s.link.id;
    link.grains = [frame = net::make_frame({proto::msg_type::grains, 0, {{"grains", grains}}})] {
      return frame;
    };
    sim_context* ctx = nullptr;
    if (shared) {
      contexts.push_back(std::make_unique<sim_context>(
          *shared, s.link.id, std::make_shared<const nlohmann::json>(grains)));
      ctx = contexts.back().get();
      link.context = ctx;
      link.jobs = &ctx->jobs();
      // A simulated minion keeps no master_tops (a byte less per minion).
      link.on_pillar = [ctx](nlohmann::ordered_json pillar, nlohmann::json) {
        ctx->set_pillar(std::move(pillar));
      };
    }
    std::shared_ptr<schedule::scheduler>* sched = nullptr;
    if (!schedule_jobs.empty()) {
      schedulers.emplace_back();
      sched = &schedulers.back();
      link.schedule = [frame = minion::schedule_message(schedule_jobs)] { return frame; };
      link.on_schedule_periods = [sched](const nlohmann::json& body) {
        if (*sched) minion::apply_schedule_periods(**sched, body);
      };
    }
    std::string id = s.link.id;
    sets.push_back(std::make_unique<minion::master_set>(
        io.get_executor(), std::move(s), minion::master_set::deps{link, on_serving, nullptr}));
    if (ctx) ctx->set_masters(sets.back().get());
    if (sched) {
      *sched = std::make_shared<schedule::scheduler>(
          io.get_executor(), id, schedule_jobs,
          minion::scheduled_run_hooks(*sets.back(), std::chrono::seconds(3600)),
          schedule::scheduler::options{o.schedule_spread});
    }
  }

  if (schedulers.size() != 0 && schedulers.size() != sets.size()) {
    throw base::error("swarm: internal: a scheduler per minion");
  }
  for (auto& s : schedulers) s->start();
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](std::error_code ec, int) {
    if (ec) return;
    for (auto& s : schedulers) s->stop();
    for (auto& s : sets) s->stop();
    io.stop();
  });

  t_start = std::chrono::steady_clock::now();
  asio::co_spawn(io, start_minions(&sets, o.connect_rate), net::logged("swarm start"));

  auto started = std::chrono::steady_clock::now();
  asio::steady_timer report(io);
  auto counts = [&] {
    int64_t c[4] = {0, 0, 0, 0};  // connected, pending, refused, connecting
    std::map<std::string, int64_t> per_master;
    for (const auto& s : sets) {
      auto l = s->links();
      switch (best_of(l)) {
        case agent_state::accepted:
          ++c[0];
          break;
        case agent_state::pending:
          ++c[1];
          break;
        case agent_state::refused:
          ++c[2];
          break;
        case agent_state::connecting:
          ++c[3];
          break;
      }
      for (const auto& [addr, st] : l) {
        if (st == agent_state::accepted) ++per_master[addr];
      }
    }
    std::string line =
        fmt::format("connected={} pending={} refused={} connecting={}", c[0], c[1], c[2], c[3]);
    if (!schedulers.empty()) {
      uint64_t started = 0, deferred = 0, skipped = 0;
      for (const auto& s : schedulers) {
        started += s->runs_started();
        deferred += s->runs_deferred();
        skipped += s->runs_skipped();
      }
      line += fmt::format(" runs={} deferred={} skipped={}", started, deferred, skipped);
    }
    if (masters.size() > 1) {
      line += " masters";
      for (const auto& m : masters) line += fmt::format(" {}={}", m.text(), per_master[m.text()]);
    }
    return line;
  };
  std::function<void(std::error_code)> tick = [&](std::error_code ec) {
    if (ec) return;
    double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::vector<std::string> said;
    {
      std::lock_guard lock(report_mu);
      said.swap(events);
    }
    for (const auto& line : said) std::printf("%s\n", line.c_str());
    std::printf("t=%.1fs %s\n", t, counts().c_str());
    std::fflush(stdout);
    if (o.seconds > 0 && t >= o.seconds) {
      for (auto& s : schedulers) s->stop();
      for (auto& s : sets) s->stop();
      io.stop();
      return;
    }
    report.expires_after(std::chrono::seconds(1));
    report.async_wait(tick);
  };
  report.expires_after(std::chrono::seconds(1));
  report.async_wait(tick);

  unsigned n = o.threads ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> threads;
  for (unsigned i = 1; i < n; ++i) threads.emplace_back([&] { io.run(); });
  io.run();
  for (auto& t : threads) t.join();
  std::printf("final %s\n", counts().c_str());
  return 0;
}

}  // namespace brine::swarm
