#include "master/cluster_node.h"

#include <spdlog/spdlog.h>

#include <asio/post.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <future>
#include <set>

#include "base/error.h"
#include "base/fs.h"
#include "cluster/identity.h"
#include "master/publisher.h"
#include "proto/message.h"

namespace brine::master {

using namespace std::chrono_literals;

namespace {

// Acknowledgements wait this long to share one notification.
constexpr std::chrono::milliseconds k_relay_interval{10};

}  // namespace

std::string peer_address(const base::master_config& cfg) {
  std::string host = cfg.cluster_advertise;
  if (host.empty()) {
    host = cfg.interface == "0.0.0.0" || cfg.interface == "::" ? base::host_name() : cfg.interface;
  }
  if (host.find(':') != std::string::npos && host.front() != '[') host = "[" + host + "]";
  return host + ":" + std::to_string(cfg.cluster_port);
}

cluster_node::cluster_node(deps d, const base::master_config& cfg, std::string name,
                           const pki::keypair& cluster_key, const pki::keypair& own_key,
                           counters c)
    : d_(d),
      cfg_(cfg),
      name_(std::move(name)),
      cluster_key_(cluster_key),
      own_key_(own_key),
      counters_(std::move(c)),
      members_(cluster::self{cfg.cluster_id, name_, peer_address(cfg), &cluster_key_, &own_key_}) {}

void cluster_node::join() {
  std::promise<std::string> done;
  d_.store.post([this, &done](store::store& db) {
    try {
      auto rows = db.heartbeat(members_.row(stats()));
      int64_t now = 0;
      for (const auto& r : rows) {
        if (r.name == name_) now = r.seen_ms;
      }
      done.set_value(members_.update(std::move(rows), now));
    } catch (const std::exception& e) {
      done.set_value(std::string("cannot write this master's heartbeat: ") + e.what());
    }
  });
  std::string problem = done.get_future().get();
  if (!problem.empty()) throw base::error("cluster " + cfg_.cluster_id + ": " + problem);
  size_t alive = 0;
  for (const auto& m : members_.members()) alive += m.alive ? 1 : 0;
  std::vector<std::string> static_peers;
  for (const auto& p : cfg_.cluster_peers) static_peers.push_back(p.text());
  links_ = std::make_unique<cluster::peer_links>(
      d_.io,
      cluster::peer_links::settings{cfg_.cluster_id, name_,
                                    cfg_.interface == "::" ? "::" : cfg_.interface,
                                    cfg_.cluster_port, static_peers, cfg_.max_frame_bytes},
      own_key_, cluster_key_, members_.row({}));
  links_->listen();
  links_->start();
  link_members();
  spdlog::info("cluster {}: joined as {} (peer address {}); {} members alive, cluster key {}",
               cfg_.cluster_id, name_, peer_address(cfg_), alive, cluster_key_.fingerprint());
}

void cluster_node::rebalance(int64_t now_ms) {
  auto plan = balancer_.after_heartbeat(members_.members(), name_, now_ms);
  if (plan.shed == 0) return;
  asio::post(d_.io, [this, plan] {
    std::string why = "cluster " + cfg_.cluster_id + ": " + name_ + " holds more than its share (" +
                      std::to_string(plan.share) + ") of the " + std::to_string(plan.total) +
                      " minions of " + std::to_string(plan.members) + " members";
    size_t n = d_.sessions.shed(plan.shed, why);
    spdlog::info("{}: asked {} of its minions to connect again through the balancer", why, n);
  });
}

nlohmann::json cluster_node::stats() {
  auto now = std::chrono::steady_clock::now();
  uint64_t published = counters_.published ? counters_.published() : 0;
  uint64_t returns = counters_.returns ? counters_.returns() : 0;
  double seconds = last_beat_ == std::chrono::steady_clock::time_point{}
                       ? 0
                       : std::chrono::duration<double>(now - last_beat_).count();
  auto rate = [&](uint64_t n, uint64_t before) {
    return seconds > 0 ? static_cast<double>(n - before) / seconds : 0.0;
  };
  nlohmann::json s = {{"connected", d_.sessions.connected()},
                      {"jobs_per_s", rate(published, last_published_)},
                      {"returns_per_s", rate(returns, last_returns_)},
                      {"store_ms", store_ms_.load()},
                      {"revision", counters_.revision ? counters_.revision() : std::string()},
                      {"jobs", published},
                      {"returns", returns}};
  last_beat_ = now;
  last_published_ = published;
  last_returns_ = returns;
  return s;
}

asio::awaitable<void> cluster_node::heartbeat_loop(const std::atomic<bool>& stopping,
                                                   std::function<void()> removed) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (;;) {
    timer.expires_after(cluster::k_heartbeat_interval);
    std::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (ec || stopping) co_return;
    if (removed_told_) continue;
    // A store thread that is behind runs one heartbeat when it gets to it,
    // not a queue of them.
    if (beat_queued_.exchange(true)) continue;
    d_.store.post([this, removed](store::store& db) {
      beat_queued_ = false;
      auto t0 = std::chrono::steady_clock::now();
      try {
        auto rows = db.heartbeat(members_.row(stats()));
        store_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                        .count();
        int64_t now = 0;
        for (const auto& r : rows) {
          if (r.name == name_) now = r.seen_ms;
        }
        std::string problem = members_.update(std::move(rows), now);
        link_members();
        rebalance(now);
        // Said once while it lasts, not every second.
        if (problem != last_problem_) {
          if (!problem.empty()) {
            spdlog::warn("cluster {}: {}", cfg_.cluster_id, problem);
          } else {
            spdlog::info("cluster {}: the membership problem is over", cfg_.cluster_id);
          }
          last_problem_ = problem;
        }
        if (!store_ok_.exchange(true)) {
          spdlog::info("cluster {}: the store answers again", cfg_.cluster_id);
        }
        if (members_.removed() && !removed_told_.exchange(true)) asio::post(d_.io, removed);
      } catch (const std::exception& e) {
        if (store_ok_.exchange(false)) {
          spdlog::error(
              "cluster {}: the store does not answer ({}); publishes wait for it up to "
              "store_failover_wait ({} s) each",
              cfg_.cluster_id, e.what(), cfg_.store_failover_wait);
        }
      }
    });
  }
}

asio::awaitable<void> cluster_node::relay_loop(const std::atomic<bool>& stopping) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (;;) {
    timer.expires_after(k_relay_interval);
    std::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (ec || stopping) co_return;
    std::map<std::string, std::vector<std::string>> batch;
    {
      std::lock_guard lock(acks_mu_);
      batch.swap(acks_);
    }
    if (batch.empty()) continue;
    // Lost with the store: the job's master then records these minions as
    // unacknowledged at its deadline, and their returns replace that.
    d_.store.post([batch = std::move(batch)](store::store& db) {
      try {
        db.announce_acks(batch);
      } catch (const std::exception& e) {
        spdlog::warn("cluster: acknowledgements not announced: {}", e.what());
      }
    });
  }
}

void cluster_node::acknowledged(const std::string& id, const std::string& jid) {
  std::lock_guard lock(acks_mu_);
  acks_[jid].push_back(id);
}

void cluster_node::on_job(store::change c) {
  if (c.origin == name_) return;
  if (c.job) {
    deliver(std::move(*c.job));
    return;
  }
  // Too big for a notification: read from its row.
  d_.store.post([this, jid = c.jid](store::store& db) {
    std::optional<store::job_record> job;
    try {
      job = db.get_job(jid);
    } catch (const std::exception& e) {
      spdlog::error("cluster: cannot read job {} published by another master: {}", jid, e.what());
      return;
    }
    if (!job) return;  // purged meanwhile
    asio::post(d_.io, [this, job = std::move(*job)]() mutable { deliver(std::move(job)); });
  });
}

void cluster_node::catch_up(store::store& db) {
  size_t taken = 0;
  try {
    for (auto& job : db.unsettled_jobs()) {
      if (job.master == name_ || d_.deliveries.holds(job.jid)) continue;
      std::set<std::string> resolved;
      for (auto& id : db.returned_minions(job.jid)) resolved.insert(std::move(id));
      for (auto& u : db.get_undelivered(job.jid)) resolved.insert(std::move(u.minion));
      std::erase_if(job.minions, [&](const std::string& id) { return resolved.contains(id); });
      if (job.minions.empty()) continue;
      ++taken;
      asio::post(d_.io, [this, job = std::move(job)]() mutable { deliver(std::move(job)); });
    }
  } catch (const std::exception& e) {
    spdlog::error("cluster {}: cannot read the open jobs after the change feed came back: {}",
                  cfg_.cluster_id, e.what());
    return;
  }
  if (taken > 0) {
    spdlog::info("cluster {}: {} jobs of other members published while the change feed was "
                 "down taken on",
                 cfg_.cluster_id, taken);
  }
}

void cluster_node::deliver(store::job_record job) {
  auto deadline = std::chrono::system_clock::time_point(std::chrono::seconds(job.deliver_by));
  if (deadline <= d_.clock()) return;
  // `brine events` on every member shows every member's jobs.
  d_.events.publish("brine/job/" + job.jid + "/new", publisher::new_job_event(job));
  auto frame = publisher::frame_of(job);
  auto targets =
      d_.deliveries.open({job.jid, frame, deadline, job.master}, std::move(job.minions));
  if (!targets.empty()) {
    spdlog::debug("cluster: job {} of {} sent to {} minions connected here", job.jid, job.master,
                  targets.size());
  }
  for (const auto& s : targets) s->conn->send(frame);
}

void cluster_node::stop() {
  if (links_) links_->stop();
}

void cluster_node::link_members() {
  if (!links_) return;
  std::set<std::string> peers;
  for (const auto& m : members_.members()) {
    if (m.alive && m.record.name != name_ && !m.record.peer.empty()) peers.insert(m.record.peer);
  }
  links_->set_targets(std::move(peers));
}

void cluster_node::remove(const std::string& name, std::function<void(nlohmann::json)> answer) {
  if (name.empty()) {
    answer(proto::api_error(
        "remove-peer needs the master's name (host:port, as `brine cluster status` lists it)"));
    return;
  }
  d_.store.post([name, answer, cluster = cfg_.cluster_id](store::store& db) {
    try {
      if (!db.remove_member(name)) {
        answer(proto::api_error("no master named " + name +
                                " in the store; `brine cluster status` lists the members"));
        return;
      }
      spdlog::info("cluster {}: master {} removed; it closes its minions' connections at its "
                   "next heartbeat",
                   cluster, name);
      answer({{"ok", true}, {"removed", name}});
    } catch (const std::exception& e) {
      answer(proto::api_error(e.what()));
    }
  });
}

nlohmann::json cluster_node::status() const {
  nlohmann::json out = nlohmann::json::array();
  auto links = links_ ? links_->states() : std::map<std::string, cluster::peer_links::state>{};
  for (const auto& m : members_.members()) {
    nlohmann::json link = nullptr;  // this master itself
    if (m.record.name != name_) {
      auto l = links.find(m.record.peer);
      link = l == links.end()
                 ? nlohmann::json{{"up", false}, {"error", "not linked"}}
                 : nlohmann::json{{"up", l->second.up}, {"rtt_ms", l->second.rtt_ms},
                                  {"error", l->second.error}};
      if (l != links.end()) links.erase(l);
    }
    nlohmann::json stats = m.record.stats;
    // This master's own count as it is now, not as its last heartbeat said.
    if (m.record.name == name_ && stats.is_object()) stats["connected"] = d_.sessions.connected();
    out.push_back({{"name", m.record.name},
                   {"link", link},
                   {"peer", m.record.peer},
                   {"self", m.record.name == name_},
                   {"cluster_id", m.record.cluster_id},
                   {"alive", m.alive},
                   {"verified", m.verified},
                   {"removed", m.record.removed},
                   {"last_heartbeat_ms", m.age_ms},
                   {"stats", stats}});
  }
  // cluster_peers that answer as no member of the store (or not at all).
  nlohmann::json others = nlohmann::json::array();
  for (const auto& [address, st] : links) {
    others.push_back({{"peer", address}, {"name", st.name}, {"up", st.up}, {"error", st.error}});
  }
  return {{"cluster_id", cfg_.cluster_id},
          {"master", name_},
          {"other_peers", others},
          {"cluster_finger", cluster_key_.fingerprint()},
          {"store_reachable", store_ok_.load()},
          {"members", out}};
}

}  // namespace brine::master
