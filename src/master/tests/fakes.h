#pragma once

// What the unit tests of delivery, store_sync and cluster_node stand in for
// the daemon's parts with: minion sessions over in-memory connections (the
// frames each minion was sent, decoded back), a clock the test sets, and a
// wait for the store thread. The store itself is the real SQLite one.

#include <asio/error.hpp>
#include <asio/io_context.hpp>
#include <asio/strand.hpp>
#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "master/session.h"
#include "master/store_worker.h"
#include "net/connection.h"
#include "net/stream.h"

namespace brine::master::fakes {

// The bytes a connection wrote, kept; nothing is ever read.
class recording_stream final : public net::byte_stream {
 public:
  struct tape {
    std::mutex mu;
    std::vector<uint8_t> bytes;
  };
  explicit recording_stream(std::shared_ptr<tape> t) : tape_(std::move(t)) {}

  asio::awaitable<std::error_code> read_into(proto::frame_decoder&) override {
    co_return std::error_code(asio::error::operation_not_supported);
  }
  asio::awaitable<std::error_code> write_all(std::span<const uint8_t> bytes) override {
    append(bytes);
    co_return std::error_code{};
  }
  size_t try_write(std::span<const uint8_t> bytes, std::error_code&) override {
    append(bytes);
    return bytes.size();
  }
  void close() override {}
  const std::string& peer() const override { return peer_; }
  const std::string& last_error() const override { return error_; }

 private:
  void append(std::span<const uint8_t> bytes) {
    std::lock_guard lock(tape_->mu);
    tape_->bytes.insert(tape_->bytes.end(), bytes.begin(), bytes.end());
  }
  std::shared_ptr<tape> tape_;
  std::string peer_ = "memory";
  std::string error_;
};

// Minions "connected" by the test: accepted sessions whose connections
// write into memory on `io` (run it, io.poll(), for what was sent to go out).
class test_sessions final : public session_directory {
 public:
  explicit test_sessions(asio::io_context& io) : io_(io) {}

  session_ptr connect(const std::string& id) {
    auto t = std::make_shared<recording_stream::tape>();
    auto s = std::make_shared<session>();
    s->id = id;
    s->accepted = true;
    s->conn = std::make_shared<net::connection>(asio::make_strand(io_),
                                                std::make_unique<recording_stream>(t),
                                                proto::frame_decoder(1 << 20));
    std::lock_guard lock(mu_);
    sessions_[id] = s;
    tapes_[id].push_back(std::move(t));
    return s;
  }
  void disconnect(const std::string& id) {
    std::lock_guard lock(mu_);
    sessions_.erase(id);
  }

  // The jids of the publishes `id` was sent, on every connection it had, in
  // order (io.poll() first).
  std::vector<std::string> published_to(const std::string& id) {
    std::vector<std::string> jids;
    std::lock_guard lock(mu_);
    for (const auto& t : tapes_[id]) {
      proto::frame_decoder decoder(1 << 24);
      {
        std::lock_guard tape_lock(t->mu);
        decoder.feed(t->bytes);
      }
      proto::message m;
      while (decoder.next(m) == proto::frame_decoder::status::ready) {
        if (m.type == proto::msg_type::publish) jids.push_back(m.body.at("jid").get<std::string>());
        m = proto::message{};
      }
    }
    return jids;
  }

  // What apply_remote_key_changes was told, call by call.
  std::vector<std::vector<std::string>> remote_key_changes() {
    std::lock_guard lock(mu_);
    return remote_;
  }

  session_ptr find_accepted(const std::string& id) override {
    std::lock_guard lock(mu_);
    auto it = sessions_.find(id);
    return it == sessions_.end() ? nullptr : it->second;
  }
  size_t connected() override {
    std::lock_guard lock(mu_);
    return sessions_.size();
  }
  void apply_remote_key_changes(const std::vector<std::string>& ids) override {
    std::lock_guard lock(mu_);
    remote_.push_back(ids);
  }
  // Sheds the first `n` ids (in order), disconnected at once.
  size_t shed(size_t n, const std::string&) override {
    std::lock_guard lock(mu_);
    size_t done = 0;
    for (auto it = sessions_.begin(); it != sessions_.end() && done < n; ++done) {
      shed_.push_back(it->first);
      it = sessions_.erase(it);
    }
    return done;
  }
  std::vector<std::string> shed_ids() {
    std::lock_guard lock(mu_);
    return shed_;
  }

 private:
  asio::io_context& io_;
  std::mutex mu_;
  std::map<std::string, session_ptr> sessions_;
  std::map<std::string, std::vector<std::shared_ptr<recording_stream::tape>>> tapes_;
  std::vector<std::vector<std::string>> remote_;
  std::vector<std::string> shed_;
};

// Wall time that moves only when the test moves it; safe to read from the
// store and feed threads.
class test_clock {
 public:
  using time_point = std::chrono::system_clock::time_point;
  explicit test_clock(time_point start = time_point(std::chrono::seconds(1'700'000'000)))
      : now_(start) {}
  time_point now() const { return now_.load(); }
  void advance(std::chrono::system_clock::duration d) { now_.store(now_.load() + d); }
  base::wall_clock fn() {
    return [this] { return now(); };
  }

 private:
  std::atomic<time_point> now_;
};

// Waits (at most 10 s) until the store thread ran everything posted before;
// false if it did not.
inline bool drain(store_worker& store) {
  auto done = std::make_shared<std::promise<void>>();
  auto f = done->get_future();
  store.post([done](store::store&) { done->set_value(); });
  return f.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
}

// Runs `fn` on the store thread and waits (at most 10 s) for its answer.
template <typename Fn>
auto on_store(store_worker& store, Fn fn) {
  using result = decltype(fn(std::declval<store::store&>()));
  auto done = std::make_shared<std::promise<result>>();
  auto f = done->get_future();
  store.post([done, fn = std::move(fn)](store::store& db) mutable {
    try {
      if constexpr (std::is_void_v<result>) {
        fn(db);
        done->set_value();
      } else {
        done->set_value(fn(db));
      }
    } catch (...) {
      done->set_exception(std::current_exception());
    }
  });
  if (f.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    throw std::runtime_error("the store thread did not answer within 10 s");
  }
  return f.get();
}

}  // namespace brine::master::fakes
