#include "swarm/swarm.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fcntl.h>
#include <ctime>
#include <map>
#include <mutex>
#include <sys/resource.h>
#include <thread>
#include <unistd.h>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/redirect_error.hpp>
#include <asio/signal_set.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>
#include <asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

#include "base/error.h"
#include "base/fs.h"
#include "base/log.h"
#include "minion/agent.h"
#include "net/connection.h"

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
    keys.push_back(pki::keypair::from_seed(reinterpret_cast<const uint8_t*>(seeds.data()) + 32 * i));
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

struct counters {
  std::atomic<int64_t> connecting{0};
  std::atomic<int64_t> pending{0};
  std::atomic<int64_t> accepted{0};
  std::atomic<int64_t> refused{0};

  std::atomic<int64_t>& of(agent_state s) {
    switch (s) {
      case agent_state::connecting: return connecting;
      case agent_state::pending: return pending;
      case agent_state::accepted: return accepted;
      case agent_state::refused: return refused;
    }
    return connecting;
  }
};

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

// Starts the agents at `rate` per second (all at once when 0).
asio::awaitable<void> start_agents(std::vector<std::unique_ptr<minion::agent>>* agents,
                                   double rate) {
  auto executor = co_await asio::this_coro::executor;
  asio::steady_timer pace(executor);
  auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < agents->size(); ++i) {
    if (rate > 0) {
      pace.expires_at(start +
                      std::chrono::microseconds(static_cast<int64_t>(static_cast<double>(i) * 1e6 / rate)));
      std::error_code ec;
      co_await pace.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
    (*agents)[i]->start();
  }
}

}  // namespace

int run_swarm(const swarm_options& o) {
  auto level = base::parse_log_level(o.log_level);
  if (!level) throw base::error("--log-level " + o.log_level + " is not a log level");
  spdlog::set_level(*level);
  if (o.keys_dir.empty()) throw base::error("--keys-dir is required (keys are cached there)");
  auto colon = o.master.rfind(':');
  if (colon == std::string::npos) throw base::error("--master must be HOST:PORT, got " + o.master);
  std::string host = o.master.substr(0, colon);
  int port = 0;
  try {
    port = std::stoi(o.master.substr(colon + 1));
  } catch (const std::exception&) {
  }
  if (port < 1 || port > 65535) throw base::error("--master port must be 1..65535: " + o.master);

  rlim_t fds = raise_fd_limit();
  if (o.count + 64 > fds) {
    throw base::error("--count " + std::to_string(o.count) + " needs more descriptors than the " +
                      "limit of " + std::to_string(fds) + "; run several swarm processes");
  }
  auto t_keys = std::chrono::steady_clock::now();
  auto keys = load_keys(o.keys_dir, o.id_prefix, o.count);
  std::fprintf(stderr, "swarm: %u keys ready in %.2f s\n", o.count,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t_keys).count());

  asio::io_context io;
  net::tls_context tls(net::tls_context::role::client);
  modules::registry functions;
  modules::register_test_module(functions);
  shared_trust trust(o.master_finger);
  counters count;
  count.connecting = o.count;
  publish_tracker publishes(o.count);
  std::atomic<double> all_connected_at{0};
  std::atomic<double> all_connected_unix{0};
  // Set when the first agent starts: certificate making is not connecting.
  std::chrono::steady_clock::time_point t_start;

  std::vector<std::unique_ptr<net::tls_identity>> identities;
  std::vector<std::unique_ptr<minion::memory_spool>> spools;
  std::vector<std::unique_ptr<minion::agent>> agents;
  identities.reserve(o.count);
  spools.reserve(o.count);
  agents.reserve(o.count);
  int width = static_cast<int>(std::to_string(o.count).size());
  for (uint32_t i = 0; i < o.count; ++i) {
    char num[16];
    std::snprintf(num, sizeof num, "%0*u", width, i + 1);
    minion::agent_settings s;
    s.id = o.id_prefix + num;
    s.master = host;
    s.master_port = static_cast<uint16_t>(port);
    s.source = "brine swarm";
    s.acceptance_wait_time = std::chrono::seconds(o.acceptance_wait_time);
    s.master_alive_interval = std::chrono::seconds(o.master_alive_interval);
    if (!o.source_addresses.empty()) {
      s.source_address = o.source_addresses[i % o.source_addresses.size()];
    }
    identities.push_back(std::make_unique<net::tls_identity>(keys[i], s.id));
    spools.push_back(std::make_unique<minion::memory_spool>());
    agents.push_back(std::make_unique<minion::agent>(
        asio::make_strand(io), std::move(s),
        minion::agent::deps{tls, identities.back().get(), functions, *spools.back(), nullptr,
                            [&trust](EVP_PKEY* k, const std::string& w) { return trust(k, w); },
                            [&](agent_state from, agent_state to) {
                              --count.of(from);
                              if (++count.of(to) == o.count && to == agent_state::accepted) {
                                all_connected_at = std::chrono::duration<double>(
                                                       std::chrono::steady_clock::now() - t_start)
                                                       .count();
                                all_connected_unix =
                                    std::chrono::duration<double>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count();
                              }
                            },
                            [&publishes](const std::string& jid) { publishes.received(jid); }}));
  }

  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](std::error_code ec, int) {
    if (ec) return;
    for (auto& a : agents) a->stop();
    io.stop();
  });

  t_start = std::chrono::steady_clock::now();
  asio::co_spawn(io, start_agents(&agents, o.connect_rate), net::logged("swarm start"));

  auto started = std::chrono::steady_clock::now();
  asio::steady_timer report(io);
  bool said_all = false;
  std::function<void(std::error_code)> tick = [&](std::error_code ec) {
    if (ec) return;
    double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (!said_all && count.accepted.load() == o.count) {
      said_all = true;
      std::printf("all %u connected after %.3f s (unix %.3f)\n", o.count, all_connected_at.load(),
                  all_connected_unix.load());
    }
    std::printf("t=%.1fs connected=%lld pending=%lld refused=%lld connecting=%lld\n", t,
                static_cast<long long>(count.accepted.load()),
                static_cast<long long>(count.pending.load()),
                static_cast<long long>(count.refused.load()),
                static_cast<long long>(count.connecting.load()));
    std::fflush(stdout);
    if (o.seconds > 0 && t >= o.seconds) {
      for (auto& a : agents) a->stop();
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
  std::printf("final connected=%lld pending=%lld refused=%lld connecting=%lld\n",
              static_cast<long long>(count.accepted.load()),
              static_cast<long long>(count.pending.load()),
              static_cast<long long>(count.refused.load()),
              static_cast<long long>(count.connecting.load()));
  return 0;
}

}  // namespace brine::swarm
