#include "master/master.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <asio/co_spawn.hpp>
#include <asio/redirect_error.hpp>
#include <asio/signal_set.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/fs.h"
#include "store/store.h"

namespace brine::master {

namespace {

// The store is opened (and the key registry filled) before the members that
// use them are built.
std::unique_ptr<store_worker> open_store(const base::master_config& cfg, pki::key_registry& keys) {
  base::ensure_dir(cfg.cachedir, 0700, "cachedir");
  auto db = store::open_sqlite(cfg.cachedir + "/jobs.db");
  keys.load(db->load_keys());
  return std::make_unique<store_worker>(std::move(db));
}

}  // namespace

master::master(base::master_config cfg)
    : cfg_(std::move(cfg)),
      identity_((base::ensure_dir(cfg_.pki_dir, 0700, "pki_dir"),
                 pki::keypair::load_or_create(cfg_.pki_dir, "master"))),
      tls_(std::make_unique<net::tls_context>(net::tls_context::role::server, identity_, "master")),
      keys_({cfg_.auto_accept, cfg_.autosign_file, cfg_.autoreject_file}),
      store_(open_store(cfg_, keys_)),
      sessions_(io_, cfg_, *tls_, keys_, *store_, events_),
      returns_(*store_, events_),
      jobs_(keys_, sessions_, *store_, events_),
      api_(io_, cfg_, identity_, keys_, sessions_, jobs_, events_) {
  base::ensure_dir(cfg_.sock_dir, 0700, "sock_dir");
  sessions_.listen();
  api_.listen();
  sessions_.set_handlers({
      nullptr,
      nullptr,
      [this](const std::shared_ptr<session>& s, proto::message&& m) {
        if (m.type == proto::msg_type::job_return) {
          returns_.on_return(s, std::move(m));
        } else {
          spdlog::debug("minion {} received job {}", s->id, m.body.value("jid", ""));
        }
      },
  });
}

master::~master() = default;

int master::run() {
  spdlog::info("master listening on {}:{} (fingerprint {}); local API {}", cfg_.interface,
               sessions_.port(), identity_.fingerprint(), api_.path());

  asio::signal_set signals(io_, SIGINT, SIGTERM);
  signals.async_wait([this](std::error_code ec, int sig) {
    if (ec) return;
    spdlog::info("signal {}: stopping", sig);
    stop();
  });
  sessions_.start();
  api_.start();
  asio::co_spawn(io_, purge_loop(), net::logged("job cache purge"));
  asio::co_spawn(io_, returns_.flush_loop(stopping_), net::logged("return_ack flush"));

  unsigned n = cfg_.worker_threads;
  if (n == 0) n = std::clamp(std::thread::hardware_concurrency(), 1u, 4u);
  std::vector<std::thread> threads;
  for (unsigned i = 1; i < n; ++i) threads.emplace_back([this] { io_.run(); });
  io_.run();
  for (auto& t : threads) t.join();
  sessions_.clear();
  store_->stop();
  spdlog::info("master stopped");
  return 0;
}

void master::stop() {
  if (stopping_.exchange(true)) return;
  sessions_.stop();
  api_.stop();
  io_.stop();
}

asio::awaitable<void> master::purge_loop() {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (;;) {
    int64_t cutoff = base::unix_now() - int64_t{cfg_.keep_jobs} * 3600;
    store_->post([cutoff](store::store& db) {
      size_t n = db.purge_jobs_before(cutoff);
      if (n > 0) spdlog::info("job cache: purged {} jobs older than keep_jobs", n);
    });
    timer.expires_after(std::chrono::minutes(10));
    std::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (ec || stopping_) co_return;
  }
}

}  // namespace brine::master
