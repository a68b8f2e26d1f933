#include "cluster/balance.h"

#include <algorithm>

namespace brine::cluster {

namespace {

// The connected count a member's heartbeat reported; -1 when it has none
// (a brine from before the figure).
int64_t connected_of(const member& m) {
  auto c = m.record.stats.find("connected");
  if (c == m.record.stats.end() || !c->is_number_integer()) return -1;
  return c->get<int64_t>();
}

}  // namespace

balancer::plan balancer::after_heartbeat(const std::vector<member>& members, const std::string& me,
                                         int64_t now_ms) {
  plan p;
  std::map<std::string, int64_t> since;
  std::vector<int64_t> counts;
  int64_t mine = -1;
  bool settled = true;
  for (const auto& m : members) {
    if (!m.alive || m.record.removed) continue;
    int64_t n = connected_of(m);
    if (n < 0) continue;
    auto s = alive_since_.find(m.record.name);
    int64_t first = s == alive_since_.end() ? now_ms : s->second;
    since[m.record.name] = first;
    if (now_ms - first < k_settle_ms) settled = false;
    counts.push_back(n);
    p.total += static_cast<size_t>(n);
    if (m.record.name == me) mine = n;
  }
  alive_since_ = std::move(since);  // a member that died is new when it is back
  p.members = counts.size();
  if (p.members < 2 || mine < 0) return p;
  p.share = (p.total + p.members - 1) / p.members;
  const size_t tolerance = std::max<size_t>(1, p.share / 10);
  const auto over = static_cast<size_t>(mine);
  bool someone_short = std::any_of(counts.begin(), counts.end(), [&](int64_t n) {
    return static_cast<size_t>(n) + tolerance < p.share;
  });
  if (!settled || !someone_short || over <= p.share + tolerance) return p;
  if (last_shed_ms_ != 0 && now_ms - last_shed_ms_ < k_shed_interval_ms) return p;
  size_t excess = over - p.share;
  p.shed = std::min(std::max<size_t>(1, excess / 2), k_max_shed);
  last_shed_ms_ = now_ms;
  return p;
}

}  // namespace brine::cluster
