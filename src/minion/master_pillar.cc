#include "minion/master_pillar.h"

#include <algorithm>
#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <memory>
#include <random>

#include "base/error.h"
#include "base/fs.h"
#include "minion/minion.h"
#include "minion/spool.h"
#include "net/dns.h"
#include "net/tls.h"
#include "pki/keys.h"

namespace brine::minion {

using status = call_reply::status;

namespace {

call_reply reply_of(status st, std::string detail) {
  call_reply r;
  r.st = st;
  r.detail = std::move(detail);
  return r;
}

// Shared by first_answer and the completion handlers of its tries, which
// may run after it has returned.
struct race_state {
  race_state(const asio::any_io_executor& ex, size_t n) : wake(ex), replies(n), signals(n) {}
  asio::steady_timer wake;
  std::vector<std::optional<call_reply>> replies;
  // Owned here, not by the tries: a signal outlives the coroutine bound to it.
  std::vector<std::unique_ptr<asio::cancellation_signal>> signals;
  size_t finished = 0;
};

void launch(const std::shared_ptr<race_state>& st, const asio::any_io_executor& ex,
            const pillar_try& start, size_t i) {
  st->signals[i] = std::make_unique<asio::cancellation_signal>();
  auto done = [st, i](std::exception_ptr e, call_reply r) {
    if (e) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& x) {
        r = reply_of(status::failed, x.what());
      }
    }
    st->replies[i] = std::move(r);
    ++st->finished;
    st->wake.cancel();
  };
  asio::co_spawn(ex, start(i), asio::bind_cancellation_slot(st->signals[i]->slot(), done));
}

}  // namespace

asio::awaitable<race_result> first_answer(size_t n, pillar_try start,
                                          std::chrono::steady_clock::duration stagger,
                                          std::chrono::steady_clock::time_point deadline) {
  race_result out;
  if (n == 0) co_return out;
  auto ex = co_await asio::this_coro::executor;
  auto st = std::make_shared<race_state>(ex, n);
  size_t started = 0;
  size_t seen = 0;  // failures already answered by starting the next try
  launch(st, ex, start, started++);
  auto last_start = std::chrono::steady_clock::now();
  for (;;) {
    for (size_t i = 0; i < started && !out.winner; ++i) {
      if (st->replies[i] && st->replies[i]->st == status::answered) out.winner = i;
    }
    if (out.winner) break;
    if (st->finished > seen) {
      for (size_t fresh = st->finished - seen; fresh > 0 && started < n; --fresh) {
        launch(st, ex, start, started++);
        last_start = std::chrono::steady_clock::now();
      }
      seen = st->finished;
      continue;
    }
    if (st->finished == n) break;  // every try failed
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) break;
    if (started < n && now - last_start >= stagger) {
      launch(st, ex, start, started++);
      last_start = now;
      continue;
    }
    st->wake.expires_at(started < n ? std::min(deadline, last_start + stagger) : deadline);
    std::error_code ec;
    co_await st->wake.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  out.replies.resize(n);
  for (size_t i = 0; i < n; ++i) {
    if (st->replies[i]) {
      out.replies[i] = *st->replies[i];
    } else if (i < started) {
      st->signals[i]->emit(asio::cancellation_type::terminal);
      out.replies[i] = out.winner ? reply_of(status::cancelled, "another master answered first")
                                  : reply_of(status::timed_out, "no answer in time");
    }
  }
  co_return out;
}

// What master_call keeps alive while the call runs: the links, what they
// reference, and the io_context they run on.
struct master_call::links {
  explicit links(const base::minion_config& cfg)
      : identity((base::ensure_dir(cfg.pki_dir, 0700, "pki_dir"),
                  pki::keypair::load_or_create(cfg.pki_dir, "minion"))),
        tls(net::tls_context::role::client, identity, cfg.id),
        no_history("", 1, 1) {}

  pki::keypair identity;
  net::tls_context tls;
  // A call connection takes no jobs: the links' job machinery stays empty.
  modules::registry no_functions;
  memory_spool no_spool;
  jid_history no_history;
  asio::io_context io;
  std::vector<std::shared_ptr<agent>> agents;
  std::shared_ptr<agent> winner;
};

master_call::master_call(const base::minion_config& cfg) : cfg_(cfg) {}

master_call::~master_call() { stop(); }

void master_call::stop() {
  if (!links_) return;
  for (auto& a : links_->agents) a->stop();
  // The closed connections' handlers end the io_context's work.
  links_->io.restart();
  links_->io.run();
}

asio::io_context* master_call::io() { return links_ ? &links_->io : nullptr; }

master_pillar master_call::fetch_pillar(const nlohmann::json& grains, bool keep_open) {
  master_pillar out;
  struct target {
    base::master_address address;
    std::vector<asio::ip::tcp::endpoint> endpoints;  // empty: resolve the name
  };
  std::vector<target> targets;
  std::mt19937_64 rng{std::random_device{}()};
  if (!cfg_.use_srv_records) {
    for (const auto& m : cfg_.masters) targets.push_back({m, {}});
    if (cfg_.random_master) std::shuffle(targets.begin(), targets.end(), rng);
  } else {
    // As the daemon finds its masters, before anything runs: the lookups block.
    std::string name = "_brine._tcp." + cfg_.srv_domain;
    auto answer = net::lookup_srv(name, cfg_.srv_resolver, net::k_lookup_timeout);
    for (const auto& r : net::rfc2782_order(answer.records, rng)) {
      target t{{r.target, r.port}, {}};
      try {
        auto hosts = net::lookup_host(r.target, cfg_.srv_resolver, net::k_lookup_timeout);
        for (const auto& a : hosts.addresses) t.endpoints.emplace_back(a, r.port);
        targets.push_back(std::move(t));
      } catch (const base::error& e) {
        out.failed.emplace_back(t.address.text(), reply_of(status::unreachable, e.what()));
      }
    }
  }
  if (targets.empty()) return out;

  stop();
  links_ = std::make_unique<links>(cfg_);
  auto& l = *links_;
  const base::minion_config& cfg = cfg_;
  agent::deps deps{l.tls,
                   nullptr,
                   l.no_functions,
                   l.no_spool,
                   l.no_history,
                   nullptr,
                   [&cfg](EVP_PKEY* key, const std::string& where) {
                     return trust_master_key(cfg, key, where);
                   }};
  for (const auto& t : targets) {
    agent_settings s;
    s.id = cfg.id;
    s.source = cfg.source;
    s.master = t.address.host;
    s.master_port = t.address.port;
    s.endpoints = t.endpoints;
    s.master_alive_interval = std::chrono::seconds(cfg.master_alive_interval);
    s.max_frame_bytes = cfg.max_frame_bytes;
    l.agents.push_back(std::make_shared<agent>(l.io.get_executor(), std::move(s), deps));
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(cfg.auth_timeout);
  std::optional<race_result> result;
  std::exception_ptr error;
  auto& agents = l.agents;
  pillar_try ask = [&agents, &grains, deadline, keep_open](size_t i) {
    return agents[i]->fetch_pillar(grains, deadline, keep_open);
  };
  asio::co_spawn(l.io, first_answer(agents.size(), ask, k_call_stagger, deadline),
                 [&](std::exception_ptr e, race_result r) {
                   error = e;
                   result = std::move(r);
                 });
  if (keep_open) {
    // The winner's connection stays open (its reads are work): run until
    // the race is decided; the cancelled tries close while the call runs.
    while (!result && l.io.run_one() > 0) {
    }
  } else {
    // Returns once the race is decided and the cancelled tries have closed.
    l.io.run();
  }
  if (error) std::rethrow_exception(error);
  for (size_t i = 0; i < agents.size(); ++i) {
    const auto& r = result->replies[i];
    if (result->winner == i) {
      out.pillar = std::move(result->replies[i]->pillar);
      out.tops = std::move(result->replies[i]->tops);
      out.master = agents[i]->address();
      l.winner = agents[i];
    } else {
      out.failed.emplace_back(
          agents[i]->address(),
          r ? *r : reply_of(status::timed_out, "not asked before the deadline"));
    }
  }
  return out;
}

namespace {

// salt:// requests of a call, over the connection its pillar came on. A
// member function object, not a capturing lambda: the coroutine uses `link`
// after its first suspension.
struct call_files {
  std::shared_ptr<agent> link;

  asio::awaitable<nlohmann::json> operator()(nlohmann::json request) const {
    auto body = co_await agent::file_request(link, std::move(request), k_file_request_limit);
    co_return body;
  }
};

}  // namespace

fileserver::file_transport master_call::files() const {
  if (!links_ || !links_->winner) {
    throw base::error("brine call asked for salt:// files before a master gave it its pillar");
  }
  return call_files{links_->winner};
}

master_pillar fetch_master_pillar(const base::minion_config& cfg, const nlohmann::json& grains) {
  master_call call(cfg);
  return call.fetch_pillar(grains, false);
}

bool key_not_accepted(const master_pillar& r) {
  return !r.pillar && std::any_of(r.failed.begin(), r.failed.end(), [](const auto& f) {
    return f.second.st == status::not_accepted;
  });
}

std::string no_pillar_message(const base::minion_config& cfg, const master_pillar& r) {
  std::string config = cfg.source.empty() ? "the minion config" : cfg.source;
  std::string text;
  if (r.failed.empty()) {
    return "no master to ask for the pillar (no SRV records of _brine._tcp." + cfg.srv_domain +
           "): fix the masters in " + config + ", or run masterless with --local";
  }
  if (key_not_accepted(r)) {
    text = "minion key not accepted: no master gave minion " + cfg.id + " its pillar";
  } else {
    text = "no master answered the pillar request of minion " + cfg.id + " within auth_timeout (" +
           std::to_string(cfg.auth_timeout) + " s)";
  }
  for (const auto& [master, reply] : r.failed) {
    text += "\n  master " + master + ": ";
    if (reply.st == status::not_accepted) {
      std::string state = reply.detail.substr(0, reply.detail.find(':'));
      if (state == "pending") {
        text +=
            "the key is pending: accept it on the master with 'brine key accept " + cfg.id + "'";
      } else if (state == "rejected" || state == "deleted") {
        text += "the key is " + state + ": accept it on the master with 'brine key accept " +
                cfg.id + " --include-rejected'";
      } else if (state == "denied") {
        text += "the key is denied: the master holds another key for " + cfg.id +
                "; delete it there ('brine key delete " + cfg.id +
                "') if this minion was reinstalled";
      } else {
        text += reply.detail;
      }
    } else {
      text += reply.detail;
    }
  }
  if (key_not_accepted(r)) {
    text +=
        "\nbrine call needs a master that has accepted this minion's key; --local runs "
        "masterless";
  } else {
    text += "\nstart the master or fix 'master' in " + config +
            ", raise auth_timeout there, or run masterless with --local";
  }
  return text;
}

}  // namespace brine::minion
