#include "minion/spool.h"

#include <filesystem>
#include <unistd.h>

#include <stdexcept>

#include <nlohmann/json.hpp>
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

void spool::save(const std::string& jid, const encoded_return& ret) {
  base::write_file_atomic(path(jid), std::string(ret.begin(), ret.end()), 0600);
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

std::vector<encoded_return> spool::load_all() const {
  std::set<std::string> jids;
  {
    std::lock_guard lock(mu_);
    jids = jids_;
  }
  std::vector<encoded_return> out;
  for (const auto& jid : jids) {
    try {
      std::string bytes = base::read_file(path(jid));
      // Checked before it goes out: a damaged file must not cost the
      // connection (the master closes on a malformed frame).
      if (!nlohmann::json::from_msgpack(bytes).is_object()) {
        throw std::runtime_error("not a MessagePack map");
      }
      out.emplace_back(bytes.begin(), bytes.end());
    } catch (const std::exception& e) {
      spdlog::error("spooled return {} is unreadable and is dropped: {}", path(jid), e.what());
      ::unlink(path(jid).c_str());
    }
  }
  return out;
}

}  // namespace brine::minion

namespace brine::minion {

void memory_spool::save(const std::string& jid, const encoded_return& ret) {
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

std::vector<encoded_return> memory_spool::load_all() const {
  std::lock_guard lock(mu_);
  std::vector<encoded_return> out;
  out.reserve(returns_.size());
  for (const auto& [jid, ret] : returns_) out.push_back(ret);
  return out;
}

}  // namespace brine::minion
