#include "cluster/membership.h"

#include <spdlog/spdlog.h>

#include "cluster/identity.h"

namespace brine::cluster {

membership::membership(self me)
    : me_(std::move(me)),
      finger_(me_.own_key->fingerprint()),
      cluster_finger_(me_.cluster_key->fingerprint()) {}

store::member_record membership::row(nlohmann::json stats) const {
  store::member_record r;
  r.name = me_.name;
  r.cluster_id = me_.cluster_id;
  r.peer = me_.peer;
  r.finger = finger_;
  r.cluster_finger = cluster_finger_;
  r.proof = prove(*me_.cluster_key, r);
  r.stats = std::move(stats);
  return r;
}

std::string membership::update(std::vector<store::member_record> rows, int64_t now_ms) {
  std::vector<member> out;
  std::string problem;
  bool removed = false;
  std::lock_guard lock(mu_);
  for (auto& r : rows) {
    member m;
    m.age_ms = std::max<int64_t>(0, now_ms - r.seen_ms);
    bool recent = r.seen_ms > 0 && m.age_ms < k_dead_after_ms;
    if (r.name == me_.name) {
      removed = r.removed;
      m.verified = true;
      m.alive = !r.removed;
      m.record = std::move(r);
      out.push_back(std::move(m));
      continue;
    }
    if (r.cluster_id.empty()) continue;  // a master of the store outside any cluster
    m.verified = verify(*me_.cluster_key, r);
    m.alive = m.verified && recent && !r.removed;
    if (recent && !r.removed && problem.empty()) {
      if (r.cluster_id != me_.cluster_id) {
        problem = "the store already serves cluster '" + r.cluster_id + "' (master " + r.name +
                  ", heard from " + std::to_string(m.age_ms) +
                  " ms ago), and this master's cluster_id is '" + me_.cluster_id +
                  "': one store serves one cluster; give every master the same cluster_id, or "
                  "this one another database";
      } else if (r.cluster_finger != cluster_finger_) {
        problem = "master " + r.name + " of cluster '" + r.cluster_id +
                  "' presents cluster key " + r.cluster_finger + ", and this master's (in " +
                  "cluster_pki_dir) is " + cluster_finger_ +
                  ": copy cluster_pki_dir from a running master to this one (brine cluster "
                  "init makes a cluster's key once)";
      }
    }
    if (!m.verified && recent && !r.removed && warned_.insert(r.name).second) {
      spdlog::warn(
          "cluster {}: master {} is in the store without a proof made with this cluster's key; "
          "it is not counted as a member",
          me_.cluster_id, r.name);
    }
    m.record = std::move(r);
    out.push_back(std::move(m));
  }
  members_ = std::move(out);
  removed_ = removed;
  return problem;
}

bool membership::alive(const std::string& name) const {
  std::lock_guard lock(mu_);
  for (const auto& m : members_) {
    if (m.record.name == name) return m.alive;
  }
  return false;
}

bool membership::removed() const {
  std::lock_guard lock(mu_);
  return removed_;
}

std::vector<member> membership::members() const {
  std::lock_guard lock(mu_);
  return members_;
}

}  // namespace brine::cluster
