#include "pki/key_registry.h"

#include <fnmatch.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

namespace brine::pki {

using store::key_record;
using store::key_state;

bool glob_match(const std::string& glob, const std::string& text) {
  return ::fnmatch(glob.c_str(), text.c_str(), 0) == 0;
}

bool key_registry::glob_file::matches(const std::string& id) {
  if (path.empty()) return false;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (mtime_ns != -2) {
      spdlog::warn(
          "{}: cannot read it ({}); no minion id matches it until it exists: create it "
          "or remove the option from the master config",
          path, std::strerror(errno));
    }
    mtime_ns = -2;
    globs.clear();
    return false;
  }
  int64_t mtime = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
  if (mtime != mtime_ns) {
    mtime_ns = mtime;
    globs.clear();
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
      auto b = line.find_first_not_of(" \t\r");
      auto e = line.find_last_not_of(" \t\r");
      if (b == std::string::npos || line[b] == '#') continue;
      globs.push_back(line.substr(b, e - b + 1));
    }
  }
  return std::any_of(globs.begin(), globs.end(),
                     [&](const std::string& g) { return glob_match(g, id); });
}

std::map<std::string, key_registry::entry> key_registry::group(
    const std::vector<key_record>& keys) {
  std::map<std::string, entry> out;
  for (const auto& k : keys) {
    entry& e = out[k.id];
    if (k.state == key_state::denied) {
      e.denied.push_back(k);
    } else {
      e.main = k;
    }
  }
  for (auto& [id, e] : out) {
    std::sort(e.denied.begin(), e.denied.end(), [](const key_record& a, const key_record& b) {
      return a.fingerprint < b.fingerprint;
    });
  }
  return out;
}

bool key_registry::same(const entry& a, const entry& b) {
  auto eq = [](const key_record& x, const key_record& y) {
    return x.fingerprint == y.fingerprint && x.state == y.state && x.pubkey == y.pubkey;
  };
  if (a.main.has_value() != b.main.has_value()) return false;
  if (a.main && !eq(*a.main, *b.main)) return false;
  return std::equal(a.denied.begin(), a.denied.end(), b.denied.begin(), b.denied.end(), eq);
}

void key_registry::load(const std::vector<key_record>& keys) {
  auto grouped = group(keys);
  std::lock_guard lock(mu_);
  keys_ = std::move(grouped);
}

bool key_registry::replace(const std::string& id, const std::vector<key_record>& keys) {
  auto grouped = group(keys);
  entry fresh;
  if (auto it = grouped.find(id); it != grouped.end()) fresh = std::move(it->second);
  std::lock_guard lock(mu_);
  // This master's own decision is on its way to the store: newer than what
  // was read.
  if (unwritten_.contains(id)) return false;
  auto it = keys_.find(id);
  bool known = it != keys_.end();
  if (known && same(it->second, fresh)) return false;
  if (!known && !fresh.main && fresh.denied.empty()) return false;
  if (!fresh.main && fresh.denied.empty()) {
    keys_.erase(it);
  } else {
    keys_[id] = std::move(fresh);
  }
  return true;
}

std::vector<std::string> key_registry::reload(const std::vector<key_record>& keys) {
  auto grouped = group(keys);
  std::vector<std::string> changed;
  std::lock_guard lock(mu_);
  // Decisions not written yet stand as they are held (a reload that dropped
  // them would lose keys this master accepted a moment ago, for good: the
  // feed does not tell a master of its own writes).
  for (const auto& [id, n] : unwritten_) {
    if (auto held = keys_.find(id); held != keys_.end()) {
      grouped[id] = held->second;
    } else {
      grouped.erase(id);
    }
  }
  for (const auto& [id, e] : keys_) {
    auto it = grouped.find(id);
    if (it == grouped.end() || !same(e, it->second)) changed.push_back(id);
  }
  for (const auto& [id, e] : grouped) {
    if (!keys_.contains(id)) changed.push_back(id);
  }
  std::sort(changed.begin(), changed.end());
  keys_ = std::move(grouped);
  return changed;
}

void key_registry::unwritten(const std::vector<key_change>& changes) {
  for (const auto& c : changes) ++unwritten_[c.record.id];
}

void key_registry::written(const std::vector<key_change>& changes) {
  std::lock_guard lock(mu_);
  for (const auto& c : changes) {
    auto it = unwritten_.find(c.record.id);
    if (it != unwritten_.end() && --it->second == 0) unwritten_.erase(it);
  }
}

key_decision key_registry::present(const std::string& id, const std::string& pubkey,
                                   const std::string& fingerprint, int64_t now) {
  std::lock_guard lock(mu_);
  key_decision d = decide(id, pubkey, fingerprint, now);
  unwritten(d.changes);
  return d;
}

key_decision key_registry::decide(const std::string& id, const std::string& pubkey,
                                  const std::string& fingerprint, int64_t now) {
  key_decision d;
  entry& e = keys_[id];
  auto record = [&](key_state s) { return key_record{id, s, pubkey, fingerprint, now}; };
  if (e.main) {
    if (e.main->fingerprint == fingerprint) {
      if (e.main->state == key_state::pending && (policy_.auto_accept || autosign_.matches(id)) &&
          !autoreject_.matches(id)) {
        e.main->state = key_state::accepted;
        e.main->updated = now;
        d.changes.push_back({key_change::kind::put, *e.main});
      }
      d.state = e.main->state;
      return d;
    }
    d.state = key_state::denied;
    bool known = std::any_of(e.denied.begin(), e.denied.end(),
                             [&](const key_record& k) { return k.fingerprint == fingerprint; });
    if (!known) {
      e.denied.push_back(record(key_state::denied));
      d.changes.push_back({key_change::kind::put, e.denied.back()});
      d.new_key = true;
    }
    return d;
  }
  for (const auto& k : e.denied) {
    if (k.fingerprint == fingerprint) {
      d.state = key_state::denied;
      return d;
    }
  }
  key_state s = key_state::pending;
  if (autoreject_.matches(id)) {
    s = key_state::rejected;
  } else if (policy_.auto_accept || autosign_.matches(id)) {
    s = key_state::accepted;
  }
  e.main = record(s);
  d.state = s;
  d.changes.push_back({key_change::kind::put, *e.main});
  d.new_key = true;
  return d;
}

key_counts key_registry::counts() const {
  std::lock_guard lock(mu_);
  key_counts c;
  for (const auto& [id, e] : keys_) {
    if (e.main) {
      switch (e.main->state) {
        case key_state::pending:
          ++c.pending;
          break;
        case key_state::accepted:
          ++c.accepted;
          break;
        case key_state::rejected:
          ++c.rejected;
          break;
        case key_state::denied:
          ++c.denied;
          break;
      }
    }
    c.denied += e.denied.size();
  }
  return c;
}

key_op_result key_registry::accept(const std::string& glob, bool include_rejected,
                                   bool include_denied, int64_t now) {
  std::lock_guard lock(mu_);
  key_op_result r;
  for (auto& [id, e] : keys_) {
    if (!glob_match(glob, id)) continue;
    if (e.main && (e.main->state == key_state::pending ||
                   (include_rejected && e.main->state == key_state::rejected))) {
      e.main->state = key_state::accepted;
      e.main->updated = now;
      r.changes.push_back({key_change::kind::put, *e.main});
      r.ids.push_back(id);
      continue;
    }
    // Accepting a denied key replaces the id's key with it (the last denied one
    // is the newest key the minion presented).
    if (include_denied && !e.denied.empty()) {
      if (e.main) r.changes.push_back({key_change::kind::erase, *e.main});
      key_record k = e.denied.back();
      e.denied.pop_back();
      for (const auto& other : e.denied) r.changes.push_back({key_change::kind::erase, other});
      e.denied.clear();
      r.changes.push_back({key_change::kind::erase, k});
      k.state = key_state::accepted;
      k.updated = now;
      e.main = k;
      r.changes.push_back({key_change::kind::put, k});
      r.ids.push_back(id);
    }
  }
  unwritten(r.changes);
  return r;
}

key_op_result key_registry::reject(const std::string& glob, bool include_accepted,
                                   bool include_denied, int64_t now) {
  std::lock_guard lock(mu_);
  key_op_result r;
  for (auto& [id, e] : keys_) {
    if (!glob_match(glob, id)) continue;
    bool changed = false;
    if (e.main && (e.main->state == key_state::pending ||
                   (include_accepted && e.main->state == key_state::accepted))) {
      e.main->state = key_state::rejected;
      e.main->updated = now;
      r.changes.push_back({key_change::kind::put, *e.main});
      changed = true;
    }
    if (include_denied && !e.denied.empty() && !e.main) {
      key_record k = e.denied.back();
      e.denied.pop_back();
      r.changes.push_back({key_change::kind::erase, k});
      k.state = key_state::rejected;
      k.updated = now;
      e.main = k;
      r.changes.push_back({key_change::kind::put, k});
      changed = true;
    }
    if (changed) r.ids.push_back(id);
  }
  unwritten(r.changes);
  return r;
}

key_op_result key_registry::remove(const std::string& glob) {
  std::lock_guard lock(mu_);
  key_op_result r;
  for (auto it = keys_.begin(); it != keys_.end();) {
    if (!glob_match(glob, it->first)) {
      ++it;
      continue;
    }
    entry& e = it->second;
    if (e.main) r.changes.push_back({key_change::kind::erase, *e.main});
    for (const auto& k : e.denied) r.changes.push_back({key_change::kind::erase, k});
    if (e.main || !e.denied.empty()) r.ids.push_back(it->first);
    it = keys_.erase(it);
  }
  unwritten(r.changes);
  return r;
}

std::vector<key_record> key_registry::list() const {
  std::lock_guard lock(mu_);
  std::vector<key_record> out;
  for (const auto& [id, e] : keys_) {
    if (e.main) out.push_back(*e.main);
    out.insert(out.end(), e.denied.begin(), e.denied.end());
  }
  return out;
}

std::vector<key_record> key_registry::list_of(const std::string& id) const {
  std::lock_guard lock(mu_);
  std::vector<key_record> out;
  auto it = keys_.find(id);
  if (it == keys_.end()) return out;
  if (it->second.main) out.push_back(*it->second.main);
  out.insert(out.end(), it->second.denied.begin(), it->second.denied.end());
  return out;
}

std::optional<key_record> key_registry::accepted(const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = keys_.find(id);
  if (it == keys_.end() || !it->second.main || it->second.main->state != key_state::accepted) {
    return std::nullopt;
  }
  return it->second.main;
}

std::vector<std::string> key_registry::accepted_matching(const std::string& glob) const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const auto& [id, e] : keys_) {
    if (e.main && e.main->state == key_state::accepted && glob_match(glob, id)) out.push_back(id);
  }
  return out;
}

void key_registry::for_each_accepted(const std::function<void(const std::string& id)>& fn) const {
  std::lock_guard lock(mu_);
  for (const auto& [id, e] : keys_) {
    if (e.main && e.main->state == key_state::accepted) fn(id);
  }
}

bool key_registry::is_accepted(const std::string& id, const std::string& fingerprint) const {
  std::lock_guard lock(mu_);
  auto it = keys_.find(id);
  return it != keys_.end() && it->second.main && it->second.main->state == key_state::accepted &&
         it->second.main->fingerprint == fingerprint;
}

}  // namespace brine::pki
