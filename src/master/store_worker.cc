#include "master/store_worker.h"

#include <spdlog/spdlog.h>

namespace brine::master {

store_worker::store_worker(std::unique_ptr<store::store> db)
    : db_(std::move(db)), thread_([this] { loop(); }) {}

store_worker::~store_worker() { stop(); }

void store_worker::post(std::function<void(store::store&)> fn) {
  {
    std::lock_guard lock(mu_);
    tasks_.push_back(std::move(fn));
  }
  cv_.notify_one();
}

void store_worker::add_return(store::return_record r, std::function<void()> stored) {
  {
    std::lock_guard lock(mu_);
    returns_.push_back(std::move(r));
    stored_.push_back(std::move(stored));
  }
  cv_.notify_one();
}

void store_worker::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void store_worker::loop() {
  for (;;) {
    std::deque<std::function<void(store::store&)>> tasks;
    std::vector<store::return_record> returns;
    std::vector<std::function<void()>> stored;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !tasks_.empty() || !returns_.empty(); });
      if (tasks_.empty() && returns_.empty() && stopping_) return;
      tasks.swap(tasks_);
      returns.swap(returns_);
      stored.swap(stored_);
    }
    for (auto& t : tasks) {
      try {
        t(*db_);
      } catch (const std::exception& e) {
        spdlog::error("job cache: {}", e.what());
      }
    }
    if (returns.empty()) continue;
    try {
      db_->add_returns(returns);
    } catch (const std::exception& e) {
      // Not acknowledged: the minions keep these returns and send them again.
      spdlog::error("job cache: {} returns not stored, minions will resend them: {}",
                    returns.size(), e.what());
      continue;
    }
    for (auto& s : stored) s();
  }
}

}  // namespace brine::master
