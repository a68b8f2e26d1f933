#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "master/figures.h"
#include "report/report.h"
#include "store/store.h"

namespace brine::master {

// Runs every store call on one dedicated thread, never on an I/O thread, and
// batches returns: all returns queued while a batch commits go into the next
// transaction together. The reports of the state runs among a committed
// batch (see set_reporter) are made on the same thread and written as one
// batch after it, retried like returns while the store is down.
//
// Lifecycle: starts its thread on construction; stop() (or the destructor)
// drains what is queued and joins.
class store_worker {
 public:
  // `figures`, when given, times each store call (tests leave it out).
  explicit store_worker(std::unique_ptr<store::store> db, figures* figures = nullptr);
  ~store_worker();

  // Runs `fn` on the store thread, in order with other posted work.
  void post(std::function<void(store::store&)> fn);
  // Runs `fn` on the store thread, and again (with a growing delay, in
  // order with other such work) while it throws: for writes that must not
  // be lost while the database is down, such as key decisions.
  void post_until_done(std::function<void(store::store&)> fn);
  // Queues `r`; `stored` runs on the store thread once it is committed.
  void add_return(store::return_record r, std::function<void()> stored);
  // Called on the store thread with each batch of returns once committed;
  // what it answers is stored as reports.
  using reporter = std::function<std::vector<report::report>(
      store::store&, const std::vector<store::return_record>&)>;
  void set_reporter(reporter fn);
  void stop();

 private:
  void loop();

  std::unique_ptr<store::store> db_;
  figures* figures_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void(store::store&)>> tasks_;
  std::deque<std::function<void(store::store&)>> durable_;
  std::vector<store::return_record> returns_;
  std::vector<std::function<void()>> stored_;
  std::vector<report::report> reports_;  // made, not stored yet
  reporter reporter_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace brine::master
