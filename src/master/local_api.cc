#include "master/local_api.h"

#include <pwd.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <asio/co_spawn.hpp>
#include <asio/redirect_error.hpp>
#include <asio/strand.hpp>
#include <asio/use_awaitable.hpp>

#include "base/clock.h"
#include "base/error.h"
#include "base/fs.h"
#include "net/unix_stream.h"
#include "proto/message.h"

namespace brine::master {

using nlohmann::json;
using proto::msg_type;

namespace {

proto::message api_reply(uint64_t id, json body) {
  return {msg_type::api_reply, id, std::move(body)};
}

std::string user_name(long uid) {
  struct passwd pw {};
  struct passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (uid >= 0 && ::getpwuid_r(static_cast<uid_t>(uid), &pw, buf.data(), buf.size(), &found) == 0 &&
      found != nullptr) {
    return found->pw_name;
  }
  return "uid " + std::to_string(uid);
}

// The audit line of a key decision, with at most ten ids (`--all` may
// decide thousands).
void log_key_decision(const std::string& act, const std::vector<std::string>& ids) {
  if (ids.empty()) return;
  std::string names;
  for (size_t i = 0; i < ids.size() && i < 10; ++i) names += (i ? ", " : "") + ids[i];
  if (ids.size() > 10) names += fmt::format(" and {} more", ids.size() - 10);
  spdlog::info("keys: {} {} by the CLI: {}", ids.size(), act == "delete" ? "deleted" : act + "ed",
               names);
}

}  // namespace

local_api::local_api(asio::io_context& io, const base::master_config& cfg,
                     const pki::keypair& identity, pki::key_registry& keys,
                     minion_sessions& sessions, delivery& deliveries, publisher& jobs,
                     event_bus& events, minion_cache& cache)
    : io_(io),
      cfg_(cfg),
      identity_(identity),
      keys_(keys),
      sessions_(sessions),
      deliveries_(deliveries),
      jobs_(jobs),
      events_(events),
      cache_(cache),
      acceptor_(io) {}

local_api::~local_api() {
  if (!path_.empty()) ::unlink(path_.c_str());
}

void local_api::listen() {
  std::string path = cfg_.sock_dir + "/master.sock";
  std::error_code ec;
  if (base::file_exists(path)) {
    asio::local::stream_protocol::socket probe(io_);
    probe.connect(asio::local::stream_protocol::endpoint(path), ec);
    if (!ec) {
      throw base::error("another master is running with sock_dir " + cfg_.sock_dir +
                        " (its socket " + path + " answers); stop it first");
    }
    ::unlink(path.c_str());
  }
  path_ = path;  // ours from here on: the destructor removes it
  acceptor_.open(asio::local::stream_protocol(), ec);
  if (!ec) acceptor_.bind(asio::local::stream_protocol::endpoint(path_), ec);
  if (!ec) ::chmod(path_.c_str(), cfg_.publisher_acl.empty() ? 0600 : 0666);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw base::error("cannot listen on " + path_ + ": " + ec.message());
}

void local_api::start() {
  asio::co_spawn(io_, accept_loop(), net::logged("local API accept loop"));
}

void local_api::stop() {
  stopping_ = true;
  std::error_code ec;
  acceptor_.close(ec);
}

asio::awaitable<void> local_api::accept_loop() {
  for (;;) {
    std::error_code ec;
    asio::local::stream_protocol::socket socket(asio::make_strand(io_));
    co_await acceptor_.async_accept(socket, asio::redirect_error(asio::use_awaitable, ec));
    if (stopping_) co_return;
    if (ec) continue;
    long uid = net::peer_uid(socket);
    auto executor = socket.get_executor();
    auto stream =
        std::make_unique<net::unix_stream>(std::move(socket), "local uid " + std::to_string(uid));
    client who{uid, user_name(uid), uid == static_cast<long>(::geteuid()) || uid == 0};
    if (!who.privileged && cfg_.publisher_acl.empty()) {
      spdlog::warn(
          "local API: refused a client with uid {} (only uid {} and root may connect; "
          "a publisher_acl in the master config lets other users publish)",
          uid, ::geteuid());
      stream->close();
      continue;
    }
    auto conn = std::make_shared<net::connection>(executor, std::move(stream),
                                                  proto::frame_decoder(cfg_.max_frame_bytes));
    auto subs = std::make_shared<std::vector<uint64_t>>();
    std::weak_ptr<net::connection> weak = conn;
    conn->start(
        [this, weak, subs, who](proto::message&& m) {
          if (auto c = weak.lock()) on_message(c, who, std::move(m), subs);
        },
        [this, subs](std::error_code, const std::string&) {
          for (uint64_t t : *subs) events_.unsubscribe(t);
        });
  }
}

void local_api::on_message(const std::shared_ptr<net::connection>& c, const client& who,
                           proto::message&& m, const subscriptions& subs) {
  if (m.type != msg_type::api_request) {
    c->send({msg_type::error, m.id, {{"message", "local API takes api_request messages only"}}});
    c->close_after_flush();
    return;
  }
  std::string op = m.body.value("op", "");
  json reply;
  try {
    if (!who.privileged && op != "ping" && op != "publish" && op != "resolve") {
      spdlog::warn("local API: user {} (uid {}) refused '{}': publisher_acl grants publishing only",
                   who.user, who.uid, op);
      c->send(api_reply(m.id, proto::api_error("user " + who.user +
                                               " may only publish jobs that the "
                                               "master's publisher_acl allows ('" +
                                               op + "' needs root or the master's user)")));
      return;
    }
    if (op == "ping") {
      reply = {{"ok", true}, {"fingerprint", identity_.fingerprint()}};
    } else if (op == "publish") {
      publish(c, who, m.id, std::move(m.body), subs);
      return;  // publish replies itself
    } else if (op == "events") {
      std::string prefix = m.body.value("prefix", "brine/");
      std::weak_ptr<net::connection> weak = c;
      uint64_t id = m.id;
      subs->push_back(
          events_.subscribe(prefix, [weak, id](const std::string& tag, const json& data) {
            if (auto conn = weak.lock()) {
              conn->send({msg_type::api_event, id, {{"tag", tag}, {"data", data}}});
            }
          }));
      reply = {{"ok", true}};
    } else if (op == "resolve") {
      // What a publish would target now, and which of those are connected
      // (brine cmd --batch publishes to them a window at a time).
      std::string delimiter = m.body.value("delimiter", ":");
      target::match_result matched;
      try {
        matched = jobs_.resolve(m.body.value("target", ""), m.body.value("tgt_type", "glob"),
                                delimiter.empty() ? ':' : delimiter.front());
      } catch (const std::exception& e) {
        c->send(api_reply(m.id, {{"ok", false}, {"error", e.what()}, {"bad_target", true}}));
        return;
      }
      if (!who.privileged) {
        // What a restricted user may learn of the fleet: only the minions
        // its publisher_acl lets it run the function on.
        std::string why = jobs_.acl_refusal(who.user, m.body.value("fun", ""), matched.minions);
        if (!why.empty()) {
          spdlog::warn("resolve refused: {}", why);
          c->send(api_reply(m.id, proto::api_error(why)));
          return;
        }
      }
      json connected = json::array();
      std::vector<std::string> others;
      for (const auto& id : matched.minions) {
        if (sessions_.find_accepted(id)) {
          connected.push_back(id);
        } else {
          others.push_back(id);
        }
      }
      for (auto& id : jobs_.connected_elsewhere(others)) connected.push_back(std::move(id));
      reply = {{"ok", true},
               {"minions", matched.minions},
               {"missing", matched.missing},
               {"connected", connected}};
    } else if (op == "cluster_status" || op == "cluster_remove_peer") {
      if (!cluster_) {
        reply = proto::api_error("this master is not in a cluster (cluster_id is not set in " +
                                 cfg_.source + ")");
      } else if (op == "cluster_status") {
        reply = cluster_->status();
        reply["ok"] = true;
      } else {
        std::string name = m.body.value("name", "");
        uint64_t id = m.id;
        cluster_->remove(name, [c, id](json answer) { c->send(api_reply(id, std::move(answer))); });
        return;  // answered when the store has it
      }
    } else if (op.rfind("key_", 0) == 0) {
      reply = keys(op, m.body);
    } else if (auto h = handlers_.find(op); h != handlers_.end()) {
      uint64_t id = m.id;
      h->second(m.body, [c, id](json body) { c->send(api_reply(id, std::move(body))); });
      return;  // the handler replies
    } else {
      reply = proto::api_error("unknown local API op '" + op + "'");
    }
  } catch (const std::exception& e) {
    reply = proto::api_error(e.what());
  }
  c->send(api_reply(m.id, std::move(reply)));
}

void local_api::publish(const std::shared_ptr<net::connection>& c, const client& who,
                        uint64_t request_id, json body, const subscriptions& subs) {
  // Who publishes is what the socket says, never what the client claims.
  body["user"] = who.user;
  body["restricted"] = !who.privileged;
  std::weak_ptr<net::connection> weak = c;
  // Subscribed before the job is recorded, so no return is missed: in a
  // cluster, minions of other members may return as soon as it commits.
  // Returns and undelivered records of the job.
  auto tokens = std::make_shared<std::vector<uint64_t>>();
  auto on_jid = [this, weak, request_id, subs, tokens](const std::string& jid) {
    for (const char* what : {"/ret/", "/undelivered/"}) {
      tokens->push_back(events_.subscribe(
          "brine/job/" + jid + what, [weak, request_id](const std::string& tag, const json& data) {
            if (auto conn = weak.lock()) {
              conn->send({msg_type::api_event, request_id, {{"tag", tag}, {"data", data}}});
            }
          }));
      subs->push_back(tokens->back());
    }
  };
  jobs_.publish(
      body,
      [this, c, request_id, tokens](const json& reply) {
        // A job that was not recorded has no events to follow.
        if (!reply.value("ok", false)) {
          for (auto t : *tokens) events_.unsubscribe(t);
        }
        c->send(api_reply(request_id, reply));
      },
      on_jid);
}

json local_api::keys(const std::string& op, const json& body) {
  std::string pattern = body.value("match", "*");
  int64_t now = base::unix_now();
  if (op == "key_list") {
    json keys = json::array();
    for (const auto& k : keys_.list()) {
      keys.push_back(
          {{"id", k.id}, {"state", store::to_string(k.state)}, {"fingerprint", k.fingerprint}});
    }
    return {{"ok", true}, {"keys", keys}, {"master_fingerprint", identity_.fingerprint()}};
  }
  pki::key_op_result r;
  std::string act;
  if (op == "key_accept") {
    r = keys_.accept(pattern, body.value("include_rejected", false),
                     body.value("include_denied", false), now);
    act = "accept";
  } else if (op == "key_reject") {
    r = keys_.reject(pattern, body.value("include_accepted", false),
                     body.value("include_denied", false), now);
    act = "reject";
  } else if (op == "key_delete") {
    r = keys_.remove(pattern);
    act = "delete";
  } else {
    return proto::api_error("unknown key operation '" + op + "'");
  }
  log_key_decision(act, r.ids);
  sessions_.apply_key_changes(r, act);
  for (const auto& id : r.ids) {
    if (keys_.accepted(id)) continue;
    deliveries_.on_key_gone(id, "key " + act + (act == "delete" ? "d" : "ed") + " on the master");
    // A deleted minion is forgotten; a rejected one keeps its data for
    // when it is accepted again.
    if (act == "delete") cache_.forget(id);
  }
  return {{"ok", true}, {"ids", r.ids}};
}

}  // namespace brine::master
