#include "master/store_worker.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

namespace brine::master {

store_worker::store_worker(std::unique_ptr<store::store> db, figures* figures)
    : db_(std::move(db)), figures_(figures), thread_([this] { loop(); }) {}

namespace {

// Observes the seconds from its making to its end into `h`, if any.
class timed {
 public:
  explicit timed(metrics::histogram* h)
      : h_(h), start_(h ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point()) {}
  ~timed() {
    if (h_) h_->observe(seconds_since(start_));
  }
  timed(const timed&) = delete;
  timed& operator=(const timed&) = delete;

 private:
  metrics::histogram* h_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

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

void store_worker::set_reporter(reporter fn) {
  std::lock_guard lock(mu_);
  reporter_ = std::move(fn);
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

void store_worker::post_until_done(std::function<void(store::store&)> fn) {
  {
    std::lock_guard lock(mu_);
    durable_.push_back(std::move(fn));
  }
  cv_.notify_one();
}

void store_worker::loop() {
  // What could not be written because the database is down is kept and
  // tried again, sooner at first, then every few seconds:
  //  - a batch of returns: the minions hold those returns until they are
  //    acknowledged, but only re-send them after a reconnect, so the master
  //    must not drop them while it stays up (past k_max_retained the oldest
  //    wait in the minions' spools);
  //  - durable tasks (key decisions), in order.
  constexpr size_t k_max_retained = 200000;
  auto backoff = std::chrono::milliseconds(0);
  std::deque<std::function<void(store::store&)>> durable;
  for (;;) {
    std::deque<std::function<void(store::store&)>> tasks;
    std::vector<store::return_record> returns;
    std::vector<std::function<void()>> stored;
    std::vector<report::report> reports;
    reporter make_reports;
    {
      std::unique_lock lock(mu_);
      auto ready = [&] {
        return stopping_ || !tasks_.empty() || !returns_.empty() || !durable_.empty() ||
               !reports_.empty();
      };
      if (backoff.count() > 0) {
        // Retrying: wake for new work or when the delay is up, not before.
        cv_.wait_for(lock, backoff,
                     [&] { return stopping_ || !tasks_.empty() || !durable_.empty(); });
      } else {
        cv_.wait(lock, ready);
      }
      if (stopping_ && tasks_.empty() && returns_.empty() && durable_.empty() && reports_.empty() &&
          (durable.empty() || backoff.count() > 0)) {
        if (!durable.empty()) {
          spdlog::error(
              "job cache: {} key changes never reached the store (it was down until "
              "the master stopped)",
              durable.size());
        }
        return;
      }
      tasks.swap(tasks_);
      returns.swap(returns_);
      stored.swap(stored_);
      reports.swap(reports_);
      make_reports = reporter_;
      for (auto& d : durable_) durable.push_back(std::move(d));
      durable_.clear();
    }
    bool failed = false;
    while (!durable.empty()) {
      try {
        timed t(figures_ ? &figures_->store_task : nullptr);
        durable.front()(*db_);
        durable.pop_front();
      } catch (const std::exception& e) {
        if (backoff.count() == 0) {
          spdlog::error("job cache: {}; trying again until the store takes it", e.what());
        }
        failed = true;
        break;
      }
    }
    for (auto& t : tasks) {
      try {
        timed timer(figures_ ? &figures_->store_task : nullptr);
        t(*db_);
      } catch (const std::exception& e) {
        spdlog::error("job cache: {}", e.what());
      }
    }
    if (!returns.empty()) {
      try {
        {
          timed t(figures_ ? &figures_->store_add_returns : nullptr);
          db_->add_returns(returns);
        }
        if (backoff.count() > 0) {
          spdlog::info("job cache: {} returns stored after the store came back", returns.size());
        }
        for (auto& fn : stored) fn();
        if (make_reports) {
          try {
            auto made = make_reports(*db_, returns);
            reports.insert(reports.end(), std::make_move_iterator(made.begin()),
                           std::make_move_iterator(made.end()));
          } catch (const std::exception& e) {
            spdlog::error("reports: cannot make the reports of {} returns: {}", returns.size(),
                          e.what());
          }
        }
      } catch (const std::exception& e) {
        // Not acknowledged: kept for the next try (and held by the minions).
        if (backoff.count() == 0) {
          spdlog::error(
              "job cache: {} returns not stored yet, trying again until the store takes "
              "them (the minions keep them meanwhile): {}",
              returns.size(), e.what());
        }
        failed = true;
        std::lock_guard lock(mu_);
        if (!stopping_) {  // else the minions re-send them to whichever master serves next
          returns.insert(returns.end(), std::make_move_iterator(returns_.begin()),
                         std::make_move_iterator(returns_.end()));
          stored.insert(stored.end(), std::make_move_iterator(stored_.begin()),
                        std::make_move_iterator(stored_.end()));
          if (returns.size() > k_max_retained) {
            size_t drop = returns.size() - k_max_retained;
            returns.erase(returns.begin(), returns.begin() + static_cast<std::ptrdiff_t>(drop));
            stored.erase(stored.begin(), stored.begin() + static_cast<std::ptrdiff_t>(drop));
          }
          returns_ = std::move(returns);
          stored_ = std::move(stored);
        }
      }
    }
    if (!reports.empty()) {
      try {
        timed t(figures_ ? &figures_->store_add_reports : nullptr);
        db_->add_reports(reports);
      } catch (const std::exception& e) {
        // Their returns are stored and acknowledged, so no minion re-sends
        // them: kept here until the store takes them (past k_max_retained,
        // the oldest are lost, and said so).
        if (backoff.count() == 0) {
          spdlog::error(
              "reports: {} reports not stored yet, trying again until the store takes "
              "them: {}",
              reports.size(), e.what());
        }
        failed = true;
        std::lock_guard lock(mu_);
        if (stopping_) {
          spdlog::error(
              "reports: {} reports were never stored (the store was down until the "
              "master stopped)",
              reports.size());
        } else {
          reports.insert(reports.end(), std::make_move_iterator(reports_.begin()),
                         std::make_move_iterator(reports_.end()));
          if (reports.size() > k_max_retained) {
            size_t drop = reports.size() - k_max_retained;
            spdlog::error("reports: {} reports dropped: the store has been down too long", drop);
            reports.erase(reports.begin(), reports.begin() + static_cast<std::ptrdiff_t>(drop));
          }
          reports_ = std::move(reports);
        }
      }
    }
    if (failed) {
      backoff =
          std::clamp(backoff * 2, std::chrono::milliseconds(100), std::chrono::milliseconds(5000));
    } else if (backoff.count() > 0 && durable.empty()) {
      backoff = std::chrono::milliseconds(0);
    }
  }
}

}  // namespace brine::master
