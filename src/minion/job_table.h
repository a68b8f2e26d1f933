#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/cancellation_signal.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "modules/context.h"

namespace brine::minion {

// The jobs a minion is running now, each with the signal that cancels it:
// saltutil.running lists them, saltutil.kill_job (which `brine job kill`
// publishes) stops one (its coroutine is cancelled, so its children are killed
// and reaped).
//
// Threading: every method is safe from any thread. A job's signal is emitted
// on the job's own executor (kill posts there).
class job_table {
 public:
  struct entry {
    modules::running_job info;
    asio::any_io_executor executor;
    std::shared_ptr<asio::cancellation_signal> cancel;
  };

  // Registers `jid`; the returned signal's slot goes to the job's coroutine.
  std::shared_ptr<asio::cancellation_signal> add(modules::running_job info,
                                                 asio::any_io_executor executor);
  void remove(const std::string& jid);
  std::vector<modules::running_job> list() const;
  // Cancels `jid`; false if it is not running.
  bool kill(const std::string& jid);

 private:
  mutable std::mutex mu_;
  std::map<std::string, entry> jobs_;
};

}  // namespace brine::minion
