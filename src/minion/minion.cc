#include "minion/minion.h"

#include <thread>

#include <asio/co_spawn.hpp>
#include <asio/signal_set.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>
#include <asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

#include "base/error.h"
#include "base/fs.h"
#include "base/memory.h"

namespace brine::minion {

namespace {
// Quiet time after which an idle minion trims its resident code pages.
constexpr std::chrono::seconds k_idle_before_trim{5};
}  // namespace

agent_settings settings_from(const base::minion_config& cfg) {
  agent_settings s;
  s.id = cfg.id;
  s.master = cfg.master;
  s.master_port = cfg.master_port;
  s.source = cfg.source;
  s.acceptance_wait_time = std::chrono::seconds(cfg.acceptance_wait_time);
  s.acceptance_wait_time_max = std::chrono::seconds(cfg.acceptance_wait_time_max);
  s.master_alive_interval = std::chrono::seconds(cfg.master_alive_interval);
  s.job_timeout = std::chrono::seconds(cfg.job_timeout);
  s.max_frame_bytes = cfg.max_frame_bytes;
  return s;
}

minion::minion(base::minion_config cfg)
    : cfg_(std::move(cfg)),
      identity_((base::ensure_dir(cfg_.pki_dir, 0700, "pki_dir"),
                 pki::keypair::load_or_create(cfg_.pki_dir, "minion"))),
      tls_(net::tls_context::role::client, identity_, cfg_.id),
      spool_((base::ensure_dir(cfg_.cachedir, 0700, "cachedir"),
              base::ensure_dir(cfg_.cachedir + "/returns", 0700, "cachedir"),
              cfg_.cachedir + "/returns")) {
  modules::register_builtin_modules(functions_);
  agent_ = std::make_unique<agent>(
      asio::make_strand(io_), settings_from(cfg_),
      agent::deps{tls_, nullptr, functions_, spool_, &blocking_,
                  [this](EVP_PKEY* key, const std::string& where) {
                    return trust_master(key, where);
                  },
                  nullptr, nullptr});
}

int minion::run() {
  spdlog::info("minion {} starting (fingerprint {}), master {}:{}", cfg_.id,
               identity_.fingerprint(), cfg_.master, cfg_.master_port);
  asio::signal_set signals(io_, SIGINT, SIGTERM);
  signals.async_wait([this](std::error_code ec, int sig) {
    if (ec) return;
    spdlog::info("signal {}: stopping", sig);
    agent_->stop();
    io_.stop();
  });
  agent_->start();
  asio::co_spawn(io_, trim_when_idle(), net::logged("memory trim"));
  std::thread second([this] { io_.run(); });
  io_.run();
  second.join();
  blocking_.join();
  spdlog::info("minion stopped");
  return 0;
}

asio::awaitable<void> minion::trim_when_idle() {
  // Start-up (OpenSSL's initialisation above all) touches megabytes of
  // library code that an idle minion never runs again; once the minion has
  // been quiet for a while after start-up or after jobs, it lets go of those
  // pages (see base/memory.h). Jobs that arrive later fault back in only
  // what they run.
  asio::steady_timer timer(io_);
  uint64_t seen = agent_->jobs_received();
  bool trimmed = false;
  for (;;) {
    timer.expires_after(k_idle_before_trim);
    co_await timer.async_wait(asio::use_awaitable);
    uint64_t now = agent_->jobs_received();
    if (now != seen) {
      seen = now;
      trimmed = false;
      continue;
    }
    if (trimmed) continue;
    auto r = base::release_clean_file_pages();
    spdlog::debug("idle: released {} KiB of start-up code pages from {} mappings", r.bytes / 1024,
                  r.mappings);
    trimmed = true;
  }
}

bool minion::trust_master(EVP_PKEY* key, const std::string& where) {
  if (!pki::is_ed25519(key)) {
    spdlog::error("master at {} presented a non-Ed25519 key; refusing it", where);
    return false;
  }
  std::string fp = pki::fingerprint(key);
  if (!cfg_.master_finger.empty()) {
    if (fp != cfg_.master_finger) {
      spdlog::error("master at {} presented key fingerprint {}, but master_finger in {} is {}; "
                    "refusing to talk to it",
                    where, fp, cfg_.source, cfg_.master_finger);
      return false;
    }
    return true;
  }
  std::string saved = cfg_.pki_dir + "/minion_master.pub";
  if (!base::file_exists(saved)) {
    base::write_file_atomic(saved, pki::public_pem(key), 0644);
    spdlog::info("trusting master at {} on first use: fingerprint {} (saved to {})", where, fp,
                 saved);
    return true;
  }
  auto pinned = pki::parse_public_pem(base::read_file(saved));
  std::string pinned_fp = pinned ? pki::fingerprint(pinned.get()) : "unreadable";
  if (pinned_fp != fp) {
    spdlog::error("master at {} presented key fingerprint {}, but the master key saved in {} has "
                  "fingerprint {}; refusing to talk to it (if the master's key really changed, "
                  "delete {} or set master_finger)",
                  where, fp, saved, pinned_fp, saved);
    return false;
  }
  return true;
}

}  // namespace brine::minion
