#include "minion/spool.h"

#include <filesystem>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include "base/fs.h"

namespace brine::minion {

spool::spool(std::string dir) : dir_(std::move(dir)) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir_, ec)) {
    const auto& p = e.path();
    if (p.extension() == ".ret") jids_.insert(p.stem().string());
  }
}

std::string spool::path(const std::string& jid) const { return dir_ + "/" + jid + ".ret"; }

void spool::save(const std::string& jid, const nlohmann::json& ret) {
  std::vector<uint8_t> bytes = nlohmann::json::to_msgpack(ret);
  base::write_file_atomic(path(jid), std::string(bytes.begin(), bytes.end()), 0600);
  std::lock_guard lock(mu_);
  jids_.insert(jid);
}

void spool::forget(const std::string& jid) {
  {
    std::lock_guard lock(mu_);
    if (jids_.erase(jid) == 0) return;
  }
  ::unlink(path(jid).c_str());
}

bool spool::contains(const std::string& jid) const {
  std::lock_guard lock(mu_);
  return jids_.count(jid) > 0;
}

std::vector<nlohmann::json> spool::load_all() const {
  std::set<std::string> jids;
  {
    std::lock_guard lock(mu_);
    jids = jids_;
  }
  std::vector<nlohmann::json> out;
  for (const auto& jid : jids) {
    try {
      std::string bytes = base::read_file(path(jid));
      out.push_back(nlohmann::json::from_msgpack(bytes));
    } catch (const std::exception& e) {
      spdlog::error("spooled return {} is unreadable and is dropped: {}", path(jid), e.what());
      ::unlink(path(jid).c_str());
    }
  }
  return out;
}

}  // namespace brine::minion

namespace brine::minion {

void memory_spool::save(const std::string& jid, const nlohmann::json& ret) {
  std::lock_guard lock(mu_);
  returns_[jid] = ret;
}

void memory_spool::forget(const std::string& jid) {
  std::lock_guard lock(mu_);
  returns_.erase(jid);
}

bool memory_spool::contains(const std::string& jid) const {
  std::lock_guard lock(mu_);
  return returns_.count(jid) > 0;
}

std::vector<nlohmann::json> memory_spool::load_all() const {
  std::lock_guard lock(mu_);
  std::vector<nlohmann::json> out;
  out.reserve(returns_.size());
  for (const auto& [jid, ret] : returns_) out.push_back(ret);
  return out;
}

}  // namespace brine::minion
