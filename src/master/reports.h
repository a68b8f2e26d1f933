#pragma once

#include <cstddef>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "report/report.h"
#include "store/store.h"

namespace brine::master {

// Makes the report of each state run among a batch of returns that the
// store has just committed (report::summarise), with the job's test= read
// from the job cache.
//
// Lifecycle: owned by the master, handed to store_worker::set_reporter.
// Threading: called on the store thread only.
class reports {
 public:
  std::vector<report::report> make(store::store& db,
                                   const std::vector<store::return_record>& batch);

 private:
  // The job's test= (true for state.test); nullopt when it gave none or the
  // job is not in this store. Jobs are few against returns (a job has one
  // return per minion), so the last few answers are kept.
  std::optional<bool> test_of(store::store& db, const std::string& jid);

  std::deque<std::pair<std::string, std::optional<bool>>> recent_;
};

}  // namespace brine::master
