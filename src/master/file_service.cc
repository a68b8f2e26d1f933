#include "master/file_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <asio/post.hpp>
#include <future>
#include <tuple>

#include "base/clock.h"
#include "base/error.h"
#include "fileserver/serve.h"
#include "master/minion_sessions.h"
#include "master/store_worker.h"

namespace brine::master {

using nlohmann::json;

namespace {
// A reply's file data, at most: well under the minion's frame limit.
constexpr uint64_t k_max_reply_bytes = 4 * 1024 * 1024;

std::vector<fileserver::gitfs_remote> gitfs_remotes(const base::master_config& cfg) {
  std::vector<fileserver::gitfs_remote> out;
  for (const auto& r : cfg.gitfs_remotes) {
    fileserver::gitfs_auth auth{r.user.value_or(cfg.gitfs_user),
                                r.password.value_or(cfg.gitfs_password),
                                r.insecure_auth.value_or(cfg.gitfs_insecure_auth),
                                r.pubkey.value_or(cfg.gitfs_pubkey),
                                r.privkey.value_or(cfg.gitfs_privkey),
                                r.passphrase.value_or(cfg.gitfs_passphrase)};
    out.push_back({r.url, r.root.value_or(cfg.gitfs_root),
                   r.mountpoint.value_or(cfg.gitfs_mountpoint), r.base.value_or(cfg.gitfs_base),
                   std::move(auth)});
  }
  return out;
}

json pins_json(const std::vector<fileserver::gitfs_pin>& pins) {
  json out = json::array();
  for (const auto& p : pins) {
    out.push_back(
        {{"remote", p.remote}, {"saltenv", p.saltenv}, {"ref", p.ref}, {"commit", p.commit}});
  }
  return out;
}

std::vector<store::file_pin> to_rows(const std::vector<fileserver::gitfs_pin>& pins, int64_t now) {
  std::vector<store::file_pin> out;
  for (const auto& p : pins) out.push_back({p.remote, p.saltenv, p.ref, p.commit, now});
  return out;
}

}  // namespace

std::vector<fileserver::gitfs_pin> to_gitfs_pins(const std::vector<store::file_pin>& rows) {
  std::vector<fileserver::gitfs_pin> out;
  for (const auto& r : rows) out.push_back({r.remote, r.saltenv, r.ref, r.commit});
  return out;
}

file_service::file_service(const base::master_config& cfg, store_worker& store,
                           figures& figures)
    : store_(store),
      max_reply_bytes_(std::min<uint64_t>(k_max_reply_bytes, cfg.max_frame_bytes / 2)),
      figures_(figures) {
  std::vector<fileserver::backend*> order;
  for (const auto& name : cfg.fileserver_backend) {
    if (name == "roots") {
      roots_ = std::make_unique<fileserver::roots>(
          cfg.file_roots, std::chrono::seconds(cfg.fileserver_list_cache_time));
      order.push_back(roots_.get());
    } else if (name == "gitfs") {
      if (cfg.gitfs_remotes.empty()) {
        throw base::error("config " + cfg.source +
                          ": fileserver_backend lists gitfs but gitfs_remotes is empty; add a "
                          "remote (a git URL or path) to gitfs_remotes or remove gitfs");
      }
      gitfs_ = std::make_unique<fileserver::gitfs>(gitfs_remotes(cfg), cfg.cachedir);
      order.push_back(gitfs_.get());
    }
  }
  backend_ = std::make_unique<fileserver::layered>(std::move(order));
  if (!gitfs_) return;

  // The pinned revisions, before any minion asks.
  std::promise<std::vector<store::file_pin>> read;
  store_.post([&read](store::store& db) {
    try {
      read.set_value(db.load_file_pins());
    } catch (...) {
      read.set_exception(std::current_exception());
    }
  });
  std::vector<fileserver::gitfs_pin> pins;
  try {
    pins = to_gitfs_pins(read.get_future().get());
  } catch (const std::exception& e) {
    spdlog::error(
        "gitfs: cannot read the pinned revisions ({}); serving nothing from git until "
        "`brine fileserver update` succeeds",
        e.what());
    return;
  }
  bool unpinned = false;
  for (const auto& r : gitfs_->remotes()) {
    if (std::none_of(pins.begin(), pins.end(), [&](const auto& p) { return p.remote == r.url; })) {
      unpinned = true;
    }
  }
  if (unpinned) {
    // A remote nothing is pinned for yet (a first start): pin what it has now.
    auto f = gitfs_->fetch();
    for (const auto& e : f.errors) spdlog::error("{}", e);
    std::vector<std::string> remotes;
    std::vector<fileserver::gitfs_pin> fresh;
    for (const auto& url : f.remotes) {
      if (std::any_of(pins.begin(), pins.end(), [&](const auto& p) { return p.remote == url; })) {
        continue;
      }
      remotes.push_back(url);
      for (const auto& p : f.pins) {
        if (p.remote == url) fresh.push_back(p);
      }
    }
    if (!remotes.empty()) {
      std::promise<void> written;
      auto rows = to_rows(fresh, base::unix_now());
      store_.post([&written, &remotes, &rows](store::store& db) {
        try {
          db.put_file_pins(remotes, rows);
          written.set_value();
        } catch (...) {
          written.set_exception(std::current_exception());
        }
      });
      try {
        written.get_future().get();
        pins.insert(pins.end(), fresh.begin(), fresh.end());
        for (const auto& p : fresh) {
          spdlog::info("gitfs: pinned {} saltenv {} at {} ({})", p.remote, p.saltenv, p.commit,
                       p.ref);
        }
      } catch (const std::exception& e) {
        spdlog::error("gitfs: cannot pin the revisions of {} remotes: {}", remotes.size(),
                      e.what());
      }
    }
  }
  {
    std::lock_guard lock(apply_mu_);
    serve_pins(std::move(pins), false);
  }
  spdlog::info("gitfs: serving {} saltenvs from {} remotes", gitfs_->envs().size(),
               gitfs_->remotes().size());
}

file_service::~file_service() {
  {
    std::lock_guard lock(timer_mu_);
    stopping_ = true;
    retry_timer_.cancel();
  }
  pool_.join();
}

std::vector<std::string> file_service::serve_pins(std::vector<fileserver::gitfs_pin> pins,
                                                  bool retry) {
  const uint32_t retries = retry_wait_.tries();
  auto problems = gitfs_->apply(pins);
  if (!retry) {
    wanted_ = std::move(pins);
    ++generation_;
    retry_wait_.reset();
  }
  // A retry's problems are the ones logged when the remote fell behind.
  for (const auto& p : problems) {
    spdlog::log(retry ? spdlog::level::debug : spdlog::level::err, "{}", p);
  }

  auto served = gitfs_->pins();
  auto of = [](const std::vector<fileserver::gitfs_pin>& all, const std::string& url) {
    std::vector<fileserver::gitfs_pin> out;
    for (const auto& p : all) {
      if (p.remote == url) out.push_back(p);
    }
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
      return std::tie(a.saltenv, a.ref, a.commit) < std::tie(b.saltenv, b.ref, b.commit);
    });
    return out;
  };
  std::set<std::string> behind;
  for (const auto& r : gitfs_->remotes()) {
    if (of(wanted_, r.url) != of(served, r.url)) behind.insert(r.url);
  }
  for (const auto& url : behind_) {
    if (!behind.contains(url)) {
      spdlog::info("gitfs remote {}: caught up: serving its pinned revision (after {} retries)",
                   url, retries);
    }
  }
  for (const auto& url : behind) {
    if (!behind_.contains(url)) {
      spdlog::warn(
          "gitfs remote {}: behind its pinned revision; this master tries again by itself "
          "(after 1 s, doubling to 60 s) until it serves it",
          url);
    }
  }
  behind_ = std::move(behind);
  if (behind_.empty()) {
    retry_wait_.reset();
  } else {
    schedule_retry(retry_wait_.next(), generation_);
  }
  return problems;
}

void file_service::schedule_retry(std::chrono::milliseconds wait, uint64_t generation) {
  std::lock_guard lock(timer_mu_);
  if (stopping_) return;
  // Re-arming cancels an earlier wait: one retry is due at a time. The
  // handler runs on the pool, never on an I/O thread.
  retry_timer_.expires_after(wait);
  retry_timer_.async_wait([this, generation](std::error_code ec) {
    if (!ec) retry(generation);
  });
}

void file_service::retry(uint64_t generation) {
  {
    std::lock_guard lock(timer_mu_);
    if (stopping_) return;
  }
  std::lock_guard lock(apply_mu_);
  if (generation != generation_ || behind_.empty()) return;  // newer pins took over
  spdlog::debug("gitfs: retrying the pinned revisions of {} remotes (retry {})", behind_.size(),
                retry_wait_.tries());
  auto before = gitfs_->pins();
  serve_pins(wanted_, true);
  if (gitfs_->pins() != before) {
    spdlog::info("gitfs: switched to the pinned revisions ({} saltenvs of {} remotes)",
                 gitfs_->pins().size(), gitfs_->remotes().size());
  }
}

void file_service::reload(
    std::function<void(std::vector<fileserver::gitfs_pin>, std::vector<std::string>)> then) {
  store_.post([this, then](store::store& db) {
    uint64_t seq = ++read_seq_;
    std::vector<fileserver::gitfs_pin> pins;
    try {
      pins = to_gitfs_pins(db.load_file_pins());
    } catch (const std::exception& e) {
      spdlog::error("gitfs: cannot read the pinned revisions ({}); still serving the current ones",
                    e.what());
      if (then)
        then(gitfs_->pins(), {std::string("cannot read the pinned revisions: ") + e.what()});
      return;
    }
    asio::post(pool_, [this, seq, pins = std::move(pins), then]() mutable {
      apply(seq, std::move(pins), then);
    });
  });
}

void file_service::apply(
    uint64_t seq, std::vector<fileserver::gitfs_pin> pins,
    std::function<void(std::vector<fileserver::gitfs_pin>, std::vector<std::string>)> then) {
  std::vector<std::string> problems;
  {
    std::lock_guard lock(apply_mu_);
    // A later read was applied already: these pins are older.
    if (seq > applied_seq_) {
      auto before = gitfs_->pins();
      problems = serve_pins(std::move(pins), false);
      applied_seq_ = seq;
      auto now = gitfs_->pins();
      if (now != before) {
        spdlog::info("gitfs: switched to the pinned revisions ({} saltenvs of {} remotes)",
                     now.size(), gitfs_->remotes().size());
      }
    }
  }
  if (then) then(gitfs_->pins(), std::move(problems));
}

std::string file_service::revision() const {
  if (!gitfs_) return "";
  auto pins = gitfs_->pins();
  if (pins.empty()) return "";
  const fileserver::gitfs_pin* base = &pins.front();
  for (const auto& p : pins) {
    if (p.saltenv == "base") {
      base = &p;
      break;
    }
  }
  return base->commit.substr(0, 12) + " (" + std::to_string(pins.size()) + " refs)";
}

void file_service::pins_changed() {
  if (!gitfs_) return;
  reload(nullptr);
}

void file_service::update(std::function<void(json)> done) {
  if (!gitfs_) {
    done({{"ok", false},
          {"error",
           "this master serves no gitfs (fileserver_backend has no gitfs); nothing to "
           "update"}});
    return;
  }
  asio::post(pool_, [this, done] {
    auto f = gitfs_->fetch();
    for (const auto& e : f.errors) spdlog::warn("{}", e);
    if (f.remotes.empty()) {
      done({{"ok", false}, {"error", "no gitfs remote could be fetched"}, {"errors", f.errors}});
      return;
    }
    auto rows = to_rows(f.pins, base::unix_now());
    auto errors = f.errors;
    store_.post([this, done, remotes = f.remotes, rows, errors](store::store& db) {
      try {
        db.put_file_pins(remotes, rows);
      } catch (const std::exception& e) {
        done({{"ok", false},
              {"error", std::string("cannot pin the fetched revisions in the store: ") + e.what()},
              {"errors", errors}});
        return;
      }
      reload([done, errors](std::vector<fileserver::gitfs_pin> served,
                            std::vector<std::string> problems) {
        auto all = errors;
        all.insert(all.end(), problems.begin(), problems.end());
        done({{"ok", true}, {"pins", pins_json(served)}, {"errors", all}});
      });
    });
  });
}

void file_service::serve(const std::shared_ptr<session>& s, proto::message request) {
  asio::post(pool_, [this, s, request = std::move(request)] {
    nlohmann::json reply;
    try {
      reply = fileserver::serve(*backend_, request.body, max_reply_bytes_);
    } catch (const std::exception& e) {
      reply = {{"error", std::string("the master could not read its file server: ") + e.what()}};
    }
    // One line per request at debug: the benchmark counts a run's round trips.
    if (spdlog::should_log(spdlog::level::debug)) {
      size_t files = reply.contains("files") && reply["files"].is_array() ? reply["files"].size() : 0;
      const auto* op = request.body.is_object() && request.body.contains("op") &&
                               request.body["op"].is_string()
                           ? request.body["op"].get_ptr<const std::string*>()
                           : nullptr;
      spdlog::debug("minion {}: file_request {} answered ({} files)", s->id,
                    op != nullptr ? *op : "?", files);
    }
    if (reply.contains("error")) {
      spdlog::warn("minion {} at {}: file_request refused: {}", s->id, s->conn->peer(),
                   reply.value("error", "?"));
    } else if (reply.contains("files") && reply["files"].is_array()) {
      for (const auto& f : reply["files"]) {
        std::string err = f.is_object() ? f.value("error", "") : "";
        if (err.starts_with("refused")) {
          spdlog::warn("minion {} at {}: salt://{} {}", s->id, s->conn->peer(),
                       f.value("path", "?"), err);
        }
      }
    }
    figures_.file_requests.inc();
    if (auto files = reply.find("files"); files != reply.end() && files->is_array()) {
      uint64_t bytes = 0;
      for (const auto& f : *files) {
        auto data = f.is_object() ? f.find("data") : f.end();
        if (data != f.end() && data->is_binary()) bytes += data->get_binary().size();
      }
      figures_.file_bytes.inc(bytes);
    }
    s->conn->send({proto::msg_type::file_reply, request.id, std::move(reply)});
  });
}

}  // namespace brine::master
