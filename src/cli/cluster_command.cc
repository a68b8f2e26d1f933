#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "cli/api_client.h"
#include "cli/commands.h"
#include "cluster/identity.h"

namespace brine::cli {

using nlohmann::json;

namespace {

api_client reach(const base::master_config& cfg) {
  auto client = api_client::connect(cfg.sock_dir);
  if (!client) {
    throw base::error("no master is running with sock_dir " + cfg.sock_dir + " (from " +
                      cfg.source + "); start it with 'brine master -c " + cfg.source + "'");
  }
  return std::move(*client);
}

json answer(api_client& client, const std::string& op, json body) {
  json reply = client.request(op, std::move(body));
  if (!reply.value("ok", false)) throw base::error(reply.value("error", op + " failed"));
  reply.erase("ok");
  return reply;
}

void print_status(const json& s) {
  std::cout << "cluster " << s.value("cluster_id", "") << " (cluster key "
            << s.value("cluster_finger", "") << "), as " << s.value("master", "")
            << " sees it; store " << (s.value("store_reachable", false) ? "reachable" : "UNREACHABLE")
            << "\n";
  // Each live member's share of the minions connected to live members (the
  // members shed minions to one that holds less than an even share).
  int64_t total = 0;
  size_t live = 0;
  for (const auto& m : s.value("members", json::array())) {
    if (!m.value("alive", false) || m.value("removed", false) || !m.contains("stats") ||
        !m["stats"].is_object()) {
      continue;
    }
    total += m["stats"].value("connected", int64_t{0});
    ++live;
  }
  std::printf("%-28s %-22s %-7s %-12s %9s %6s %8s %10s %9s %10s  %s\n", "MASTER", "PEER",
              "ALIVE", "LINK", "CONNECTED", "SHARE", "JOBS/S", "RETURNS/S", "STORE MS",
              "HEARTBEAT", "REVISION");
  for (const auto& m : s.value("members", json::array())) {
    const json& st = m.contains("stats") && m["stats"].is_object() ? m["stats"] : json::object();
    bool up = m.value("alive", false) && !m.value("removed", false);
    std::string alive = m.value("removed", false) ? "removed"
                        : up                      ? "yes"
                        : m.value("verified", false) ? "down"
                                                     : "no key";
    std::string name = m.value("name", "") + (m.value("self", false) ? " *" : "");
    char ago[32];
    std::snprintf(ago, sizeof ago, "%.1f s", m.value("last_heartbeat_ms", int64_t{0}) / 1000.0);
    std::string link = "-";
    if (m.contains("link") && m["link"].is_object()) {
      char rtt[32];
      std::snprintf(rtt, sizeof rtt, "up %.1f ms", m["link"].value("rtt_ms", 0.0));
      link = m["link"].value("up", false) ? rtt : "down";
    }
    if (up) {
      int64_t connected = st.value("connected", int64_t{0});
      char share[16];
      std::snprintf(share, sizeof share, "%.0f%%",
                    total > 0 ? 100.0 * static_cast<double>(connected) / static_cast<double>(total)
                              : 0.0);
      std::printf("%-28s %-22s %-7s %-12s %9lld %6s %8.1f %10.1f %9.2f %10s  %s\n", name.c_str(),
                  m.value("peer", "").c_str(), alive.c_str(), link.c_str(),
                  static_cast<long long>(connected), share,
                  st.value("jobs_per_s", 0.0), st.value("returns_per_s", 0.0),
                  st.value("store_ms", 0.0), ago, st.value("revision", "").c_str());
      continue;
    }
    // A member that is not up serves no one: its last heartbeat's figures
    // are history, given as such with their age.
    std::printf("%-28s %-22s %-7s %-12s %9d %6s %8s %10s %9s %10s  (stale: %lld connected at "
                "its last heartbeat, %s ago)\n",
                name.c_str(), m.value("peer", "").c_str(), alive.c_str(), link.c_str(), 0, "-", "-",
                "-", "-", ago, static_cast<long long>(st.value("connected", int64_t{0})), ago);
  }
  if (live > 1) {
    std::printf("%lld minions over %zu live members: an even share is %lld each\n",
                static_cast<long long>(total), live,
                static_cast<long long>((total + static_cast<int64_t>(live) - 1) /
                                       static_cast<int64_t>(live)));
  }
  for (const auto& p : s.value("other_peers", json::array())) {
    std::cout << "cluster_peers entry " << p.value("peer", "") << ": "
              << (p.value("up", false) ? "linked to " + p.value("name", "")
                                       : "not linked (" + p.value("error", "") + ")")
              << "\n";
  }
}

}  // namespace

int cluster_command(const base::master_config& cfg, const cluster_options& o) {
  if (o.action == "init") {
    if (!cfg.clustered()) {
      throw base::error("config " + cfg.source +
                        ": cluster_id is not set; set cluster_id (and store: postgresql://...) "
                        "before `brine cluster init`");
    }
    auto r = cluster::init(cfg);
    if (o.json) {
      std::cout << json{{"cluster_pki_dir", r.dir}, {"fingerprint", r.fingerprint}, {"made", r.made}}
                       .dump(2)
                << "\n";
      return 0;
    }
    std::cout << (r.made ? "made" : "kept") << " the cluster key of " << cfg.cluster_id << " in "
              << r.dir << "\nfingerprint: " << r.fingerprint << "\n";
    if (r.made) {
      std::cout << "copy " << r.dir
                << " to every master of the cluster (keep cluster.pem mode 0600); minions may "
                   "pin the fingerprint as master_finger\n";
    }
    return 0;
  }
  auto client = reach(cfg);
  if (o.action == "status") {
    json s = answer(client, "cluster_status", json::object());
    if (o.json) {
      std::cout << s.dump(2) << "\n";
    } else {
      print_status(s);
    }
    for (const auto& m : s.value("members", json::array())) {
      if (!m.value("alive", false) && !m.value("removed", false) && m.value("verified", false)) {
        return 2;  // a member is down
      }
    }
    return 0;
  }
  if (o.action == "remove-peer") {
    json r = answer(client, "cluster_remove_peer", {{"name", o.name}});
    std::cout << "removed " << r.value("removed", o.name)
              << " from the cluster; it closes its minions' connections and stops within a "
                 "second, and its minions move to the other masters\n";
    return 0;
  }
  throw base::error("unknown cluster action '" + o.action + "'");
}

}  // namespace brine::cli
