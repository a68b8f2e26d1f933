#include "master/master.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <asio/co_spawn.hpp>
#include <asio/post.hpp>
#include <asio/redirect_error.hpp>
#include <asio/signal_set.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <future>
#include <limits>
#include <set>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/error.h"
#include "base/fs.h"
#include "cluster/identity.h"
#include "master/inventory.h"
#include "proto/message.h"
#include "store/store.h"

namespace brine::master {

namespace {

// The store is opened (and the key registry filled) before the members that
// use them are built. A database that cannot be reached yet is waited for,
// saying so; anything else (a wrong password, a newer schema) stops the start.
std::unique_ptr<store_worker> open_store(const base::master_config& cfg, const std::string& origin,
                                         pki::key_registry& keys,
                                         std::unique_ptr<store::change_feed>& feed, int& slot,
                                         figures& figures) {
  base::ensure_dir(cfg.cachedir, 0700, "cachedir");
  store::options o;
  o.url = cfg.store;
  o.sqlite_path = cfg.cachedir + "/jobs.db";
  o.password_file = cfg.store_password_file;
  o.failover_wait = std::chrono::seconds(cfg.store_failover_wait);
  o.origin = origin;
  std::unique_ptr<store::store> db;
  auto delay = std::chrono::milliseconds(500);
  for (int attempt = 0;; ++attempt) {
    try {
      db = store::open(o);
      if (attempt > 0) spdlog::info("store {}: reached; starting", db->name());
      break;
    } catch (const store::unreachable& e) {
      spdlog::warn("{}; the master waits for it (trying again in {} ms)", e.what(), delay.count());
      std::this_thread::sleep_for(delay);
      delay = std::min(delay * 2, std::chrono::milliseconds(5000));
    }
  }
  keys.load(db->load_keys());
  slot = db->shared() ? db->claim_master_slot(origin) : -1;
  feed = db->changes();
  if (db->shared()) {
    spdlog::info("store {}: shared with other masters; this master is {} (jid slot {})", db->name(),
                 origin, slot);
  }
  return std::make_unique<store_worker>(std::move(db), &figures);
}

}  // namespace

master::master(base::master_config cfg)
    : cfg_(std::move(cfg)),
      identity_((base::ensure_dir(cfg_.pki_dir, 0700, "pki_dir"),
                 pki::keypair::load_or_create(cfg_.pki_dir, "master"))),
      cluster_key_(cfg_.clustered() ? std::optional<pki::keypair>(cluster::load_key(cfg_))
                                    : std::nullopt),
      tls_(std::make_unique<net::tls_context>(net::tls_context::role::server,
                                              cluster_key_ ? *cluster_key_ : identity_, "master")),
      keys_({cfg_.auto_accept, cfg_.autosign_file, cfg_.autoreject_file}),
      name_(base::host_name() + ":" + std::to_string(cfg_.port)),
      store_(open_store(cfg_, name_, keys_, feed_, slot_, figures_)),
      cache_(*store_, name_),
      sessions_(io_, cfg_, *tls_, keys_, *store_, events_, figures_),
      returns_(*store_, events_),
      deliveries_(sessions_, *store_, events_),
      jobs_(io_, cfg_, keys_, cache_, deliveries_, *store_, events_),
      schedules_(cfg_, jobs_),
      pillar_(cfg_, jobs_.nodegroups(), cache_, figures_.compile_seconds.with({"pillar"})),
      files_(cfg_, *store_, figures_),
      compiles_(cfg_, jobs_.nodegroups(), files_.backend(), figures_),
      api_(io_, cfg_, cluster_key_ ? *cluster_key_ : identity_, keys_, sessions_, deliveries_,
           jobs_, events_, cache_) {
  base::ensure_dir(cfg_.sock_dir, 0700, "sock_dir");
  // Other users reach the socket only when a publisher_acl lets them in.
  if (!cfg_.publisher_acl.empty()) ::chmod(cfg_.sock_dir.c_str(), 0755);
  jobs_.set_identity(slot_, name_);
  schedules_.set_compiles([this] { return compiles_.in_flight(); });
  compiles_.set_scheduled([this](const std::string& jid) { return schedules_.holds(jid); });
  store_->set_reporter([this](store::store& db, const std::vector<store::return_record>& batch) {
    auto made = reports_.make(db, batch);
    for (const auto& r : made) {
      figures_.state_run_seconds.with({report::to_string(r.status)}).observe(r.duration_ms / 1000);
    }
    // The inventory's last runs: stored with the returns' next write (and
    // kept until the store takes them).
    cache_.ran(made);
    return made;
  });
  if (cfg_.clustered()) {
    if (!feed_) {
      throw base::error("config " + cfg_.source +
                        ": cluster_id is set but the store is not shared; set store: "
                        "postgresql://USER@HOST:PORT/DATABASE on every master of the cluster");
    }
    cluster_ = std::make_unique<cluster_node>(
        cluster_node::deps{io_, *store_, deliveries_, sessions_, events_}, cfg_, name_,
        *cluster_key_, identity_,
        cluster_node::counters{[this] { return jobs_.published(); },
                               [this] { return figures_.returns_received.value(); },
                               [this] { return files_.revision(); }});
    // Before serving: a master holding another cluster key refuses here.
    cluster_->join();
    deliveries_.set_origin_alive([this](const std::string& name) { return cluster_->alive(name); });
    jobs_.set_member_alive([this](const std::string& name) { return cluster_->alive(name); });
    api_.set_cluster(cluster_.get());
  }
  // At 10,000 minions an answer is tens of milliseconds of lookups under
  // the cache's shared lock: on queries_, not on an I/O thread.
  api_.handle("inventory", [this](const nlohmann::json& body,
                                  std::function<void(nlohmann::json)> reply) {
    asio::post(queries_, [this, body, reply = std::move(reply)] {
      nlohmann::json answer;
      try {
        answer = answer_inventory(body, keys_, cache_, jobs_.nodegroups());
      } catch (const std::exception& e) {
        answer = proto::api_error(e.what());
      }
      reply(std::move(answer));
    });
  });
  api_.handle("fileserver_update",
              [this](const nlohmann::json&, std::function<void(nlohmann::json)> reply) {
                files_.update(std::move(reply));
              });
  api_.handle("schedule_plan",
              [this](const nlohmann::json& body, std::function<void(nlohmann::json)> reply) {
                std::vector<std::string> ids;
                try {
                  ids = jobs_.resolve(body.value("target", "*"), body.value("tgt_type", "glob"))
                            .minions;
                } catch (const std::exception& e) {
                  return reply({{"ok", false}, {"error", e.what()}, {"bad_target", true}});
                }
                uint64_t minutes = body.value("minutes", uint64_t{60});
                if (minutes < 1 || minutes > 10080) {
                  return reply({{"ok", false},
                                {"error", "minutes must be 1..10080 (a week), got " +
                                              std::to_string(minutes)}});
                }
                int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                     std::chrono::system_clock::now().time_since_epoch())
                                     .count();
                reply(schedules_.plan(ids, now_ms - now_ms % 60000, minutes));
              });
  sessions_.listen();
  api_.listen();
  serve_metrics();
  sessions_.set_handlers({
      [this](const std::shared_ptr<session>& s) {
        cache_.seen(s->id, base::unix_now(), true);
        deliveries_.on_ready(s);
      },
      [this](const std::shared_ptr<session>& s) {
        cache_.seen(s->id, base::unix_now(), false);
        schedules_.on_gone(s->id);
      },
      [this](const std::shared_ptr<session>& s, proto::message&& m) {
        on_minion_message(s, std::move(m));
      },
  });
  reopen();
}

void master::serve_metrics() {
  using metrics::kind;
  using metrics::sample;
  metrics_.add_collector("brine_connected_minions",
                         "Minions connected to this master with an accepted key.", kind::gauge, {},
                         [this] {
                           return std::vector<sample>{
                               {{}, static_cast<double>(sessions_.connected())}};
                         });
  metrics_.add_collector("brine_keys", "Minion keys, by state.", kind::gauge, {"state"}, [this] {
    auto c = keys_.counts();
    return std::vector<sample>{{{"accepted"}, static_cast<double>(c.accepted)},
                               {{"pending"}, static_cast<double>(c.pending)},
                               {{"rejected"}, static_cast<double>(c.rejected)},
                               {{"denied"}, static_cast<double>(c.denied)}};
  });
  metrics_.add_collector("brine_jobs_published_total", "Jobs this master recorded and sent.",
                         kind::counter, {}, [this] {
                           return std::vector<sample>{{{}, static_cast<double>(jobs_.published())}};
                         });
  metrics_.add_collector(
      "brine_publishes_refused_total",
      "Publishes this master answered with an error (no minion matched, publisher_acl, the "
      "store down).",
      kind::counter, {},
      [this] { return std::vector<sample>{{{}, static_cast<double>(jobs_.refused())}}; });
  metrics_.add_collector(
      "brine_publishes_recording",
      "Publishes whose job is not recorded yet: queued for the store, or waiting for a store "
      "that does not answer (a failover), each up to store_failover_wait.",
      kind::gauge, {},
      [this] { return std::vector<sample>{{{}, static_cast<double>(jobs_.unrecorded())}}; });
  metrics_.add_collector(
      "brine_held_publishes",
      "Publishes held for targeted minions that are not connected, waiting for them until the "
      "job's delivery deadline.",
      kind::gauge, {},
      [this] { return std::vector<sample>{{{}, static_cast<double>(deliveries_.held())}}; });
  metrics_.add_collector(
      "brine_unacknowledged_publishes",
      "Publishes sent to connected minions and not acknowledged yet.", kind::gauge, {}, [this] {
        size_t waiting = deliveries_.waiting(), held = deliveries_.held();
        return std::vector<sample>{{{}, static_cast<double>(waiting > held ? waiting - held : 0)}};
      });
  metrics_.add_collector(
      "brine_catalog_cache_bytes",
      "Bytes the catalog cache holds (state_compile: master): each distinct catalog once, and "
      "each minion's keys.",
      kind::gauge, {}, [this] {
        return std::vector<sample>{{{}, static_cast<double>(compiles_.cache_counts().bytes)}};
      });
  metrics_.add_collector(
      "brine_catalog_cache_entries",
      "Catalog cache entries by kind: keys (one per minion and request) and catalogs (distinct "
      "contents).",
      kind::gauge, {"kind"}, [this] {
        auto c = compiles_.cache_counts();
        return std::vector<sample>{{{"keys"}, static_cast<double>(c.keys)},
                                   {{"catalogs"}, static_cast<double>(c.catalogs)}};
      });
  if (cfg_.metrics_port == 0) return;
  try {
    metrics_server_ = std::make_unique<http::server>(
      cfg_.metrics_interface, cfg_.metrics_port,
      [this](const http::request& r) -> http::response {
        if (r.path != "/metrics") {
          return {404, "text/plain; charset=utf-8", "not found: the figures are at /metrics\n"};
        }
        if (r.method != "GET" && r.method != "HEAD") {
          return {405, "text/plain; charset=utf-8", "/metrics answers GET\n", "GET, HEAD"};
        }
        return {200, std::string(metrics::k_content_type), metrics_.expose()};
      },
      "set metrics_port in " + cfg_.source + " to a free port (0: off)");
  } catch (const base::error& e) {
    throw base::error("metrics_port " + std::to_string(cfg_.metrics_port) + ": " + e.what());
  }
}

void master::on_minion_message(const std::shared_ptr<session>& s, proto::message&& m) {
  std::string jid = m.body.value("jid", "");
  switch (m.type) {
    case proto::msg_type::grains: {
      auto g = m.body.find("grains");
      if (g == m.body.end() || !g->is_object()) {
        spdlog::warn("minion {} at {}: grains message without a grains map ignored", s->id,
                     s->conn->peer());
        return;
      }
      cache_.set_grains(s->id, std::move(*g));
      // Its pillar follows its grains (the top file targets by them).
      pillar_.serve(s, false);
      return;
    }
    case proto::msg_type::pillar_request:
      if (s->call) {
        // brine call: compiled with the grains it sent, answered on its
        // connection alone (minion_sessions checked the grains are a map).
        pillar_.serve_call(s, m.body["grains"], m.id);
      } else {
        pillar_.serve(s, true);
      }
      return;
    case proto::msg_type::file_request:
      files_.serve(s, std::move(m));
      return;
    case proto::msg_type::schedule:
      schedules_.on_schedule(s, m);
      return;
    case proto::msg_type::run_request:
      schedules_.on_run_request(s, std::move(m));
      return;
    case proto::msg_type::compile_request:
      compiles_.serve(s, std::move(m));
      return;
    case proto::msg_type::job_return:
      figures_.returns_received.inc();
      if (auto minted = jid_generator::unix_micros(jid)) {
        auto now = std::chrono::duration_cast<std::chrono::microseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
        figures_.return_latency.observe(static_cast<double>(std::max<int64_t>(now - *minted, 0)) /
                                        1e6);
      }
      schedules_.on_return(s->id, jid);
      deliveries_.on_acknowledged(s->id, jid);
      returns_.on_return(s, std::move(m));
      return;
    case proto::msg_type::job_ack:
      spdlog::debug("minion {} received job {}", s->id, jid);
      deliveries_.on_acknowledged(s->id, jid);
      if (cluster_) cluster_->acknowledged(s->id, jid);
      return;
    case proto::msg_type::job_refused: {
      std::string reason = m.body.value("reason", "no reason given");
      if (reason == proto::k_not_targeted) {
        spdlog::debug("minion {}: job {} does not target it (its own grains)", s->id, jid);
      } else {
        spdlog::warn("minion {} refused job {}: {}", s->id, jid, reason);
      }
      figures_.refusal(reason).inc();
      deliveries_.on_refused(s->id, jid, reason);
      return;
    }
    default:
      return;
  }
}

void master::reopen() {
  // Before any minion connects, on the store thread (in order with
  // everything after it), and waited for: a restarted master knows its
  // minions' data and which publishes still wait for whom before it serves.
  std::promise<void> done;
  store_->post([this, &done](store::store& db) {
    try {
      cache_.load(db.load_minion_data());
    } catch (const std::exception& e) {
      spdlog::error("job cache: cannot read the minion data cache: {}", e.what());
    }
    try {
      cache_.load_runs(db,
                       [this](const std::string& id) { return keys_.accepted(id).has_value(); });
    } catch (const std::exception& e) {
      spdlog::error("reports: cannot read the minions' last runs: {}", e.what());
    }
    size_t held = 0, open = 0, closed = 0, lost = 0;
    auto now = std::chrono::system_clock::now();
    int64_t stamp = base::unix_now();
    try {
      for (auto& job : db.unsettled_jobs()) {
        // In a shared store, another master's open jobs are its own to
        // deliver (it settles them when it comes back). In a cluster every
        // member holds every open job for the minions that connect to it;
        // the job's master records what was undelivered, or, when it is
        // gone, whoever reaches the deadline.
        bool foreign = db.shared() && job.master != name_;
        if (foreign && !cluster_) continue;
        std::set<std::string> resolved;
        for (auto& id : db.returned_minions(job.jid)) resolved.insert(std::move(id));
        for (auto& u : db.get_undelivered(job.jid)) resolved.insert(std::move(u.minion));
        std::vector<std::string> waiting;
        for (const auto& id : job.minions) {
          if (!resolved.contains(id)) waiting.push_back(id);
        }
        auto deadline = std::chrono::system_clock::time_point(std::chrono::seconds(job.deliver_by));
        if (foreign && (waiting.empty() || deadline <= now)) {
          if (cluster_->alive(job.master)) continue;
        }
        if (waiting.empty() || deadline <= now) {
          // Past its deadline while the master was down: the minions not
          // heard from are undelivered (a late return still replaces that).
          std::vector<store::undelivered_record> left;
          for (const auto& id : waiting) {
            left.push_back({job.jid, id,
                            "not delivered: the master was down at the delivery deadline", stamp});
          }
          db.add_undelivered(left);
          db.settle_job(job.jid);
          ++closed;
          lost += left.size();
          continue;
        }
        held += waiting.size();
        ++open;
        deliveries_.open({job.jid, publisher::frame_of(job), deadline, foreign ? job.master : ""},
                         std::move(waiting));
      }
    } catch (const std::exception& e) {
      spdlog::error("job cache: cannot reopen the jobs of the last run: {}", e.what());
    }
    if (open + closed > 0) {
      spdlog::info(
          "job cache: {} jobs of the last run still within their delivery deadline "
          "(publishes held for {} minions); {} past it settled ({} minions undelivered)",
          open, held, closed, lost);
    }
    done.set_value();
  });
  done.get_future().wait();
}

master::~master() = default;

int master::run() {
  spdlog::info("master listening on {}:{} (fingerprint {}); local API {}", cfg_.interface,
               sessions_.port(), identity_.fingerprint(), api_.path());
  if (metrics_server_) {
    spdlog::info("metrics on http://{}:{}/metrics",
                 cfg_.metrics_interface.find(':') == std::string::npos
                     ? cfg_.metrics_interface
                     : "[" + cfg_.metrics_interface + "]",
                 metrics_server_->port());
  }

  asio::signal_set signals(io_, SIGINT, SIGTERM);
  signals.async_wait([this](std::error_code ec, int sig) {
    if (ec) return;
    spdlog::info("signal {}: stopping", sig);
    stop();
  });
  sessions_.start();
  api_.start();
  if (feed_) {
    sync_ = std::make_unique<store_sync>(
        store_sync::deps{*store_, keys_, sessions_, deliveries_, cache_, events_, cluster_.get(),
                         &figures_.feed_returns},
        std::move(feed_), name_);
    sync_->on_file_pins([this] { files_.pins_changed(); });
    sync_->start();
  }
  if (cluster_) {
    asio::co_spawn(
        io_,
        cluster_->heartbeat_loop(
            stopping_,
            [this] {
              spdlog::warn(
                  "cluster {}: this master was removed (brine cluster remove-peer); closing its "
                  "minions' connections and stopping",
                  cfg_.cluster_id);
              sessions_.drop_all("this master left the cluster; connect again");
              stop();
            }),
        net::logged("cluster heartbeat"));
    asio::co_spawn(io_, cluster_->relay_loop(stopping_), net::logged("cluster acknowledgements"));
  }
  asio::co_spawn(io_, purge_loop(), net::logged("job cache purge"));
  asio::co_spawn(io_, returns_.flush_loop(stopping_), net::logged("return_ack flush"));
  asio::co_spawn(io_, deliveries_.sweep_loop(stopping_), net::logged("delivery deadlines"));
  asio::co_spawn(io_, cache_.flush_loop(stopping_), net::logged("minion data cache"));

  unsigned n = cfg_.worker_threads;
  if (n == 0) n = std::clamp(std::thread::hardware_concurrency(), 1u, 4u);
  std::vector<std::thread> threads;
  for (unsigned i = 1; i < n; ++i) threads.emplace_back([this] { io_.run(); });
  io_.run();
  for (auto& t : threads) t.join();
  if (sync_) sync_->stop();
  sessions_.clear();
  cache_.flush();
  store_->stop();
  spdlog::info("master stopped");
  return 0;
}

void master::stop() {
  if (stopping_.exchange(true)) return;
  if (cluster_) cluster_->stop();
  sessions_.stop();
  api_.stop();
  io_.stop();
}

asio::awaitable<void> master::purge_loop() {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (;;) {
    int64_t cutoff = base::unix_now() - int64_t{cfg_.keep_jobs} * 3600;
    int64_t reports_cutoff = (base::unix_now() - int64_t{cfg_.keep_reports} * 3600) * 1000;
    store_->post([cutoff, reports_cutoff](store::store& db) {
      size_t n = db.purge_jobs_before(cutoff);
      if (n > 0) spdlog::info("job cache: purged {} jobs older than keep_jobs", n);
      n = db.purge_reports_before(reports_cutoff);
      if (n > 0) spdlog::info("reports: purged {} reports older than keep_reports", n);
    });
    timer.expires_after(std::chrono::minutes(10));
    std::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (ec || stopping_) co_return;
  }
}

}  // namespace brine::master
