#include "minion/job_table.h"

#include <asio/post.hpp>

namespace brine::minion {

std::shared_ptr<asio::cancellation_signal> job_table::add(modules::running_job info,
                                                          asio::any_io_executor executor) {
  auto signal = std::make_shared<asio::cancellation_signal>();
  std::lock_guard lock(mu_);
  std::string jid = info.jid;
  jobs_[jid] = entry{std::move(info), std::move(executor), signal};
  return signal;
}

void job_table::remove(const std::string& jid) {
  std::lock_guard lock(mu_);
  jobs_.erase(jid);
}

std::vector<modules::running_job> job_table::list() const {
  std::lock_guard lock(mu_);
  std::vector<modules::running_job> out;
  out.reserve(jobs_.size());
  for (const auto& [jid, e] : jobs_) out.push_back(e.info);
  return out;
}

bool job_table::kill(const std::string& jid) {
  std::shared_ptr<asio::cancellation_signal> signal;
  asio::any_io_executor executor;
  {
    std::lock_guard lock(mu_);
    auto it = jobs_.find(jid);
    if (it == jobs_.end()) return false;
    signal = it->second.cancel;
    executor = it->second.executor;
  }
  // A signal is emitted where its slot's owner runs.
  asio::post(executor, [signal] { signal->emit(asio::cancellation_type::terminal); });
  return true;
}

}  // namespace brine::minion
