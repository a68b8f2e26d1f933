#include "minion/spool.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "base/fs.h"

namespace brine::minion {

spool::spool(std::string dir) : dir_(std::move(dir)) {
  std::error_code ec;
  std::vector<std::string> jids;
  for (const auto& e : std::filesystem::directory_iterator(dir_, ec)) {
    const auto& p = e.path();
    if (p.extension() == ".ret") jids.push_back(p.stem().string());
  }
  for (const auto& jid : jids) {
    encoded_return bytes;
    std::string origin;
    if (!read(jid, bytes, origin)) continue;
    index_[jid] = {origin, bytes.size()};
    bytes_ += bytes.size();
  }
}

std::string spool::path(const std::string& jid) const { return dir_ + "/" + jid + ".ret"; }

bool spool::read(const std::string& jid, encoded_return& bytes, std::string& origin) const {
  try {
    std::string raw = base::read_file(path(jid));
    // Checked before it goes out: a damaged file must not cost the
    // connection (the master closes on a malformed frame).
    auto body = nlohmann::json::from_msgpack(raw);
    if (!body.is_object()) throw std::runtime_error("not a MessagePack map");
    auto o = body.find("origin");
    origin = o != body.end() && o->is_string() ? o->get<std::string>() : std::string();
    bytes.assign(raw.begin(), raw.end());
    return true;
  } catch (const std::exception& e) {
    spdlog::error("spooled return {} is unreadable and is dropped: {}", path(jid), e.what());
    ::unlink(path(jid).c_str());
    return false;
  }
}

void spool::save(const std::string& jid, const std::string& origin, const encoded_return& ret) {
  base::write_file_atomic(path(jid), std::string(ret.begin(), ret.end()), 0600);
  std::lock_guard lock(mu_);
  auto [it, fresh] = index_.try_emplace(jid, entry{origin, ret.size()});
  if (!fresh) {
    bytes_ -= it->second.size;
    it->second = {origin, ret.size()};
  }
  bytes_ += ret.size();
}

void spool::forget(const std::string& jid) {
  {
    std::lock_guard lock(mu_);
    auto it = index_.find(jid);
    if (it == index_.end()) return;
    bytes_ -= it->second.size;
    index_.erase(it);
  }
  ::unlink(path(jid).c_str());
}

bool spool::contains(const std::string& jid) const {
  std::lock_guard lock(mu_);
  return index_.contains(jid);
}

bool spool::owes(const std::string& origin) const {
  std::lock_guard lock(mu_);
  for (const auto& [jid, e] : index_) {
    if (e.origin == origin) return true;
  }
  return false;
}

uint64_t spool::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

size_t spool::size() const {
  std::lock_guard lock(mu_);
  return index_.size();
}

std::set<std::string> spool::origins() const {
  std::lock_guard lock(mu_);
  std::set<std::string> out;
  for (const auto& [jid, e] : index_) out.insert(e.origin);
  return out;
}

std::vector<spooled_return> spool::load(
    const std::function<bool(const std::string& origin)>& wanted) const {
  std::vector<std::string> jids;
  {
    std::lock_guard lock(mu_);
    for (const auto& [jid, e] : index_) {
      if (wanted(e.origin)) jids.push_back(jid);
    }
  }
  std::vector<spooled_return> out;
  for (const auto& jid : jids) {
    spooled_return r{jid, {}, {}};
    if (read(jid, r.bytes, r.origin)) {
      out.push_back(std::move(r));
    } else {
      std::lock_guard lock(mu_);
      if (auto it = index_.find(jid); it != index_.end()) {
        bytes_ -= it->second.size;
        index_.erase(it);
      }
    }
  }
  return out;
}

void memory_spool::save(const std::string& jid, const std::string& origin,
                        const encoded_return& ret) {
  std::lock_guard lock(mu_);
  auto& r = returns_[jid];
  bytes_ -= r.bytes.size();
  r = {jid, origin, ret};
  bytes_ += ret.size();
}

void memory_spool::forget(const std::string& jid) {
  std::lock_guard lock(mu_);
  auto it = returns_.find(jid);
  if (it == returns_.end()) return;
  bytes_ -= it->second.bytes.size();
  returns_.erase(it);
}

bool memory_spool::contains(const std::string& jid) const {
  std::lock_guard lock(mu_);
  return returns_.contains(jid);
}

bool memory_spool::owes(const std::string& origin) const {
  std::lock_guard lock(mu_);
  for (const auto& [jid, r] : returns_) {
    if (r.origin == origin) return true;
  }
  return false;
}

uint64_t memory_spool::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

size_t memory_spool::size() const {
  std::lock_guard lock(mu_);
  return returns_.size();
}

std::set<std::string> memory_spool::origins() const {
  std::lock_guard lock(mu_);
  std::set<std::string> out;
  for (const auto& [jid, r] : returns_) out.insert(r.origin);
  return out;
}

std::vector<spooled_return> memory_spool::load(
    const std::function<bool(const std::string& origin)>& wanted) const {
  std::lock_guard lock(mu_);
  std::vector<spooled_return> out;
  for (const auto& [jid, r] : returns_) {
    if (wanted(r.origin)) out.push_back(r);
  }
  return out;
}

}  // namespace brine::minion
