#include "minion/minion.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <asio/co_spawn.hpp>
#include <asio/post.hpp>
#include <asio/signal_set.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>
#include <asio/use_awaitable.hpp>
#include <cstdlib>
#include <thread>

#include "apply/state_functions.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/fs.h"
#include "base/memory.h"
#include "base/on_pool.h"
#include "base/schedule_option.h"
#include "fileserver/remote.h"
#include "minion/master_pillar.h"
#include "minion/scheduled_runs.h"
#include "schedule/spread.h"
#include "state/state_mod.h"
#include "states/registry.h"
#include "target/target.h"

namespace brine::minion {

namespace {
// Quiet time after which an idle minion trims its resident code pages.
constexpr std::chrono::seconds k_idle_before_trim{5};
// How often the figures are copied to cachedir/metrics.json (when they moved).
constexpr std::chrono::seconds k_figures_interval{10};
// How long a stopping minion waits for a state compile it abandoned.
constexpr std::chrono::seconds k_pool_work_limit{20};
// How long the minion remembers the jids it ran (a master holds a publish
// at most a day), and at most how many.
constexpr int k_jid_retention_hours = 25;
constexpr size_t k_jid_history_max = 200000;

std::string describe_masters(const base::minion_config& cfg) {
  if (cfg.use_srv_records) return "SRV records of _brine._tcp." + cfg.srv_domain;
  std::string out;
  for (const auto& m : cfg.masters) out += (out.empty() ? "" : ", ") + m.text();
  return out;
}
}  // namespace

master_set_settings settings_from(const base::minion_config& cfg) {
  master_set_settings s;
  s.link.id = cfg.id;
  s.link.source = cfg.source;
  s.link.acceptance_wait_time = std::chrono::seconds(cfg.acceptance_wait_time);
  s.link.acceptance_wait_time_max = std::chrono::seconds(cfg.acceptance_wait_time_max);
  s.link.master_alive_interval = std::chrono::seconds(cfg.master_alive_interval);
  s.link.job_timeout = std::chrono::seconds(cfg.job_timeout);
  s.link.max_frame_bytes = cfg.max_frame_bytes;
  s.link.spool_max_bytes = cfg.spool_max_bytes;
  s.masters = cfg.masters;
  s.mode = cfg.master_type;
  s.random_master = cfg.random_master;
  s.master_failback = cfg.master_failback;
  s.master_failback_interval = std::chrono::seconds(cfg.master_failback_interval);
  s.master_tries = cfg.master_tries;
  s.retry_dns = std::chrono::seconds(cfg.retry_dns);
  s.strategy = cfg.master_return_strategy;
  s.use_srv_records = cfg.use_srv_records;
  s.srv_domain = cfg.srv_domain;
  s.srv_resolver = cfg.srv_resolver;
  return s;
}

namespace {

// salt:// requests go to a master that accepts this minion, over its
// session connection. A member function object, not a capturing lambda: the
// coroutine uses `masters` after its first suspension.
struct master_files {
  master_set* masters;

  asio::awaitable<nlohmann::json> operator()(nlohmann::json request) const {
    auto link = masters->accepted_member();
    if (!link) {
      throw base::error(
          "no master accepts this minion now, so salt:// files cannot be fetched (see the "
          "minion's log for its master connections)");
    }
    auto body = co_await agent::file_request(std::move(link), std::move(request),
                                             k_file_request_limit);
    co_return body;
  }
};

// Compile masters: a state run's catalog from a master that compiles for
// this minion. Each minion starts at its own master of those that list
// the feature (a hash of its id: the same master every run, so its catalog
// cache answers, and the minions spread over the masters), and tries the
// others when that one does not answer; none: the run compiles here. A
// member function object held by the context's hooks, as master_files is
// by the file client (the coroutine refers to it); `masters` is set
// before any job runs.
constexpr std::chrono::seconds k_compile_request_limit{120};

struct master_compile {
  const std::unique_ptr<master_set>* masters;
  std::string id;

  asio::awaitable<std::optional<nlohmann::json>> operator()(nlohmann::json request) const {
    if (!*masters) co_return std::nullopt;
    auto links = (*masters)->accepted_members(proto::k_feature_compile);
    if (links.empty()) co_return std::nullopt;
    size_t first = schedule::fqdn_rand(id, "compile", links.size());
    for (size_t i = 0; i < links.size(); ++i) {
      const auto& link = links[(first + i) % links.size()];
      auto reply = co_await link->request(proto::msg_type::compile_request, request,
                                          k_compile_request_limit);
      if (reply && reply->type == proto::msg_type::compile_reply) {
        spdlog::debug("minion {}: master {} answered the compile request", id, link->address());
        co_return std::move(reply->body);
      }
      spdlog::warn("minion {}: master {} did not answer a compile request ({}); {}", id,
                   link->address(),
                   reply ? "it answered " + std::string(proto::to_string(reply->type))
                         : "connection lost, or no answer within " +
                               std::to_string(k_compile_request_limit.count()) + " s",
                   i + 1 < links.size() ? "asking the next master" : "compiling here");
    }
    co_return std::nullopt;
  }
};

}  // namespace

minion::minion(base::minion_config cfg)
    : cfg_(std::move(cfg)),
      identity_((base::ensure_dir(cfg_.pki_dir, 0700, "pki_dir"),
                 pki::keypair::load_or_create(cfg_.pki_dir, "minion"))),
      tls_(net::tls_context::role::client, identity_, cfg_.id),
      spool_((base::ensure_dir(cfg_.cachedir, 0700, "cachedir"),
              base::ensure_dir(cfg_.cachedir + "/returns", 0700, "cachedir"),
              cfg_.cachedir + "/returns")),
      history_(cfg_.cachedir + "/jids", k_jid_retention_hours, k_jid_history_max) {
  modules::register_builtin_modules(functions_);
  state::register_state_module(functions_);
  states::register_builtin_states(states_);
  apply::register_state_functions(functions_, states_);
  auto t0 = std::chrono::steady_clock::now();
  context_ = std::make_unique<context>(
      cfg_, functions_,
      context::hooks{[this](const std::shared_ptr<const nlohmann::json>& grains) {
                       auto frame = grains_message(grains);
                       {
                         std::lock_guard lock(grains_mu_);
                         grains_frame_ = frame;
                       }
                       masters_->send_to_masters(frame);
                     },
                     [this](std::string& why) {
                       static const auto request =
                           net::make_frame({proto::msg_type::pillar_request, 0, {}});
                       if (masters_->send_to_masters(request) > 0) return true;
                       why = "no master is connected to compile the pillar";
                       return false;
                     },
                     [this] { return fetch_pillar(); }, master_compile{&masters_, cfg_.id}});
  grains_frame_ = grains_message(context_->grains());
  spdlog::debug("minion {}: grains collected in {:.1f} ms ({} bytes)", cfg_.id,
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                    .count(),
                grains_frame_->size());
  agent::deps link{tls_,
                   nullptr,
                   functions_,
                   spool_,
                   history_,
                   &blocking_,
                   [this](EVP_PKEY* key, const std::string& where) {
                     return trust_master(key, where);
                   }};
  link.grains = [this] {
    std::lock_guard lock(grains_mu_);
    return grains_frame_;
  };
  link.targeted = [this](const nlohmann::json& publish) { return targeted(publish); };
  link.on_pillar = [this](nlohmann::ordered_json pillar, nlohmann::json tops) {
    spdlog::debug("minion {}: pillar received ({} keys)", cfg_.id, pillar.size());
    schedule_from_pillar(pillar);
    context_->set_master_tops(std::move(tops));
    context_->set_pillar(std::move(pillar));
  };
  link.context = context_.get();
  link.jobs = &context_->jobs();
  // Scheduled runs are granted and recorded by a master: a masterless
  // minion has none. The jobs are the config's and the pillar's `schedule`.
  const bool scheduled = cfg_.master_type != base::master_mode::disabled;
  if (scheduled) {
    schedule_ = effective_schedule(cfg_.schedule, cfg_.schedule_enabled, {}, true);
    if (!schedule_.empty()) schedule_frame_ = schedule_message(schedule_);
    link.schedule = [this] {
      std::lock_guard lock(schedule_mu_);
      return schedule_frame_;
    };
    link.on_schedule_periods = [this](const nlohmann::json& body) {
      if (scheduler_) apply_schedule_periods(*scheduler_, body);
    };
  }
  link.figures = &figures_;
  context_->set_metrics(&metrics_);
  metrics_.add_collector("brine_minion_spool_bytes",
                         "Bytes of the returns held in the spool until a master acknowledges "
                         "them (bounded by spool_max_bytes).",
                         metrics::kind::gauge, {}, [this] {
                           return std::vector<metrics::sample>{
                               {{}, static_cast<double>(spool_.bytes())}};
                         });
  metrics_.add_collector("brine_minion_spool_returns",
                         "Returns held in the spool until a master acknowledges them.",
                         metrics::kind::gauge, {}, [this] {
                           return std::vector<metrics::sample>{
                               {{}, static_cast<double>(spool_.size())}};
                         });
  metrics_.add_collector("brine_minion_jobs_running", "Jobs running now.", metrics::kind::gauge,
                         {}, [this] {
                           return std::vector<metrics::sample>{
                               {{}, static_cast<double>(context_->jobs().list().size())}};
                         });
  masters_ = std::make_unique<master_set>(
      io_.get_executor(), settings_from(cfg_),
      master_set::deps{link, nullptr, [this](const std::string&) {
                         // Nothing left to serve: the daemon ends, non-zero,
                         // so that a supervisor sees it.
                         exit_code_ = 1;
                         masters_->stop();
                         io_.stop();
                       }});
  if (scheduled) {
    scheduler_ = std::make_shared<schedule::scheduler>(
        io_.get_executor(), cfg_.id, schedule_,
        scheduled_run_hooks(*masters_, std::chrono::seconds(cfg_.job_timeout)));
  } else if (!cfg_.schedule.empty() && cfg_.schedule_enabled) {
    spdlog::warn("config {}: schedule is ignored with master_type: disable: a scheduled run is "
                 "granted and recorded by a master",
                 cfg_.source);
  }
  if (cfg_.master_type != base::master_mode::disabled && cfg_.file_client == "remote") {
    base::ensure_dir(cfg_.cachedir + "/files", 0700, "cachedir");
    context_->set_files(std::make_unique<fileserver::remote_client>(
        cfg_.cachedir + "/files", master_files{masters_.get()}));
  }
}

void minion::schedule_from_pillar(const nlohmann::ordered_json& pillar) {
  if (!scheduler_) return;
  std::vector<base::schedule_job> from_pillar;
  bool enabled = true;
  if (auto it = pillar.find("schedule"); it != pillar.end()) {
    try {
      from_pillar = base::parse_schedule(it->dump(), "the pillar's schedule", enabled);
    } catch (const std::exception& e) {
      // The jobs the pillar gave before stay: nothing is dropped for a
      // typo, and the log says what to fix.
      spdlog::error(
          "minion {}: {}; the schedule stays as it was until the pillar is fixed "
          "(then saltutil.refresh_pillar)",
          cfg_.id, e.what());
      return;
    }
  }
  net::frame_ptr frame;
  std::vector<base::schedule_job> jobs;
  {
    std::lock_guard lock(schedule_mu_);
    if (base::same_jobs(from_pillar, pillar_schedule_) && enabled == pillar_schedule_enabled_) {
      return;
    }
    pillar_schedule_ = from_pillar;
    pillar_schedule_enabled_ = enabled;
    jobs = effective_schedule(cfg_.schedule, cfg_.schedule_enabled, from_pillar, enabled);
    if (base::same_jobs(jobs, schedule_)) return;
    // A schedule that became empty is still told, so that the masters
    // forget the jobs they planned with.
    frame = schedule_message(jobs);
    schedule_frame_ = jobs.empty() ? nullptr : frame;
    schedule_ = jobs;
    // Under the lock: two masters' pillars reach the scheduler in the
    // order they were merged.
    scheduler_->set_jobs(jobs);
  }
  spdlog::info("minion {}: schedule from the config and the pillar: {} job(s){}", cfg_.id,
               jobs.size(), enabled ? "" : " (the pillar's schedule says enabled: false)");
  for (const auto& a : masters_->accepted_members(proto::k_feature_schedule)) a->send(frame);
}

void minion::forget_kept_pillar() {
  // Earlier versions kept the pillar on disk for brine call, which now asks
  // a master for it: secrets with no reader are not left lying around.
  std::string path = pillar_cache_path(cfg_);
  if (::unlink(path.c_str()) == 0) {
    spdlog::info("minion {}: removed {}, the pillar an earlier version kept for brine call",
                 cfg_.id, path);
  }
}

net::frame_ptr minion::grains_message(const std::shared_ptr<const nlohmann::json>& grains) {
  return net::make_frame({proto::msg_type::grains, 0, {{"grains", *grains}}});
}

namespace {
asio::awaitable<master_pillar> ask_masters(const base::minion_config& cfg,
                                           std::shared_ptr<const nlohmann::json> grains) {
  co_return fetch_master_pillar(cfg, *grains);
}
}  // namespace

asio::awaitable<std::shared_ptr<const nlohmann::json>> minion::fetch_pillar() {
  // As brine call asks (a one-shot call connection, first master to answer),
  // on the blocking thread: the daemon's I/O threads keep serving meanwhile.
  // A coroutine function, not a capturing coroutine lambda: the frame owns
  // its copies of the arguments.
  auto got = co_await asio::co_spawn(blocking_, ask_masters(cfg_, context_->grains()),
                                     asio::use_awaitable);
  if (got.pillar) co_return std::make_shared<const nlohmann::json>(*got.pillar);
  // The kept pillar, as the master last compiled it, rather than nothing.
  spdlog::warn("minion {}: pillar.items: {}; answering with the pillar kept", cfg_.id,
               no_pillar_message(cfg_, got));
  co_return context_->pillar();
}

bool minion::targeted(const nlohmann::json& publish) const {
  auto kind = target::parse_type(publish.value("tgt_type", "glob"));
  // Id targets were resolved exactly by the master; nodegroups are the
  // master's alone.
  if (!kind || *kind == target::type::glob || *kind == target::type::pcre ||
      *kind == target::type::list || *kind == target::type::nodegroup) {
    return true;
  }
  auto grains = context_->grains();
  try {
    auto e = target::expression::parse(publish.value("tgt", ""), *kind);
    // Its own grains and pillar decide; greedy only for a pillar it has not
    // received yet.
    auto pillar = context_->pillar();
    bool have_pillar = pillar && !pillar->empty();
    return e.matches(cfg_.id, {grains.get(), have_pillar ? pillar.get() : nullptr}, true);
  } catch (const std::exception&) {
    return true;  // N@ inside a compound: the master decided
  }
}

int minion::run() {
  const bool masterless = cfg_.master_type == base::master_mode::disabled;
  if (masterless) {
    spdlog::info("minion {} starting (fingerprint {}), masterless (master_type: disable): no "
                 "master connection; salt:// reads file_roots",
                 cfg_.id, identity_.fingerprint());
  } else {
    spdlog::info("minion {} starting (fingerprint {}), {} {}", cfg_.id, identity_.fingerprint(),
                 cfg_.master_type == base::master_mode::failover ? "failover over" : "masters",
                 describe_masters(cfg_));
  }
  if (spool_.size() > 0) {
    spdlog::info("minion {}: {} returns from before the restart wait in the spool", cfg_.id,
                 spool_.size());
  }
  forget_kept_pillar();
  asio::signal_set signals(io_, SIGINT, SIGTERM);
  signals.async_wait([this](std::error_code ec, int sig) {
    if (ec) return;
    spdlog::info("signal {}: stopping", sig);
    if (scheduler_) scheduler_->stop();
    masters_->stop();
    io_.stop();
  });
  if (!masterless) masters_->start();
  if (scheduler_) {
    for (const auto& t : scheduler_->timings()) {
      if (t.period_ms == 0) continue;
      spdlog::info("minion {}: schedule job {}: every {} s, at {:.3f} s into each interval",
                   cfg_.id, t.name, t.period_ms / 1000, t.offset_ms / 1000.0);
    }
    scheduler_->start();
  }
  asio::co_spawn(io_, trim_when_idle(), net::logged("memory trim"));
  asio::co_spawn(io_, keep_figures(), net::logged("figures"));
  std::thread second([this] { io_.run(); });
  io_.run();
  second.join();
  blocking_.join();
  // A job stopped mid-compile still has its compile on the state pool,
  // calling into context_: it ends before the members it uses do.
  if (!base::pool_work::wait_idle(k_pool_work_limit)) {
    spdlog::warn(
        "minion {}: a state compile still runs {} s after the stop; exiting without "
        "waiting for it",
        cfg_.id, k_pool_work_limit.count());
    std::_Exit(exit_code_);
  }
  spdlog::info("minion stopped");
  return exit_code_;
}

asio::awaitable<void> minion::trim_when_idle() {
  // Start-up (OpenSSL's initialisation above all) touches megabytes of
  // library code that an idle minion never runs again; once the minion has
  // been quiet for a while after start-up or after jobs, it lets go of those
  // pages (see base/memory.h). Jobs that arrive later fault back in only
  // what they run.
  asio::steady_timer timer(io_);
  uint64_t seen = masters_->jobs_received();
  bool trimmed = false;
  for (;;) {
    timer.expires_after(k_idle_before_trim);
    co_await timer.async_wait(asio::use_awaitable);
    uint64_t now = masters_->jobs_received();
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

namespace {

// Built outside the coroutine: g++ 12 miscompiles brace-initialised json
// inside coroutines.
std::string figures_copy(const metrics::registry& r, const std::string& text) {
  nlohmann::json copy = nlohmann::json::object();
  copy["time"] = base::unix_now();
  copy["figures"] = r.snapshot();
  copy["prometheus"] = text;
  return copy.dump();
}

}  // namespace

asio::awaitable<void> minion::keep_figures() {
  // brine call runs in a process of its own: status.metrics there reads
  // this copy (with its time). Written only when a figure moved, on the
  // blocking pool.
  asio::steady_timer timer(io_);
  std::string last;
  for (;;) {
    std::string text = metrics_.expose();
    if (text != last) {
      std::string data = figures_copy(metrics_, text);
      last = std::move(text);
      asio::post(blocking_, [path = cfg_.cachedir + "/" + std::string(modules::k_metrics_copy),
                             data = std::move(data)] {
        try {
          base::write_file_atomic(path, data, 0600);
        } catch (const std::exception& e) {
          spdlog::debug("figures: {}", e.what());
        }
      });
    }
    timer.expires_after(k_figures_interval);
    co_await timer.async_wait(asio::use_awaitable);
  }
}

bool minion::trust_master(EVP_PKEY* key, const std::string& where) {
  std::lock_guard lock(trust_mu_);
  return trust_master_key(cfg_, key, where);
}

bool trust_master_key(const base::minion_config& cfg, EVP_PKEY* key, const std::string& where) {
  if (!pki::is_ed25519(key)) {
    spdlog::error("master at {} presented a non-Ed25519 key; refusing it", where);
    return false;
  }
  std::string fp = pki::fingerprint(key);
  if (!cfg.master_fingers.empty()) {
    if (std::find(cfg.master_fingers.begin(), cfg.master_fingers.end(), fp) ==
        cfg.master_fingers.end()) {
      std::string allowed;
      for (const auto& f : cfg.master_fingers) allowed += (allowed.empty() ? "" : ", ") + f;
      spdlog::error(
          "master {} presented key fingerprint {}, but master_finger in {} allows {}; "
          "refusing to talk to it",
          where, fp, cfg.source, allowed);
      return false;
    }
    return true;
  }
  // Trust on first use: one key for every master (masters of a set share
  // their keypair, see the README), pinned at the first contact.
  std::string saved = cfg.pki_dir + "/minion_master.pub";
  if (!base::file_exists(saved)) {
    base::write_file_atomic(saved, pki::public_pem(key), 0644);
    spdlog::info("trusting master at {} on first use: fingerprint {} (saved to {})", where, fp,
                 saved);
    return true;
  }
  auto pinned = pki::parse_public_pem(base::read_file(saved));
  std::string pinned_fp = pinned ? pki::fingerprint(pinned.get()) : "unreadable";
  if (pinned_fp != fp) {
    spdlog::error(
        "master {} presented key fingerprint {}, but the master key saved in {} has "
        "fingerprint {}; refusing to talk to it (masters of one minion share one "
        "keypair: copy master.pem and master.pub to every master, or list each "
        "master's fingerprint in master_finger; if the master's key really changed, "
        "delete {})",
        where, fp, saved, pinned_fp, saved);
    return false;
  }
  return true;
}

}  // namespace brine::minion
