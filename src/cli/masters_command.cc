#include <fmt/format.h>

#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "base/error.h"
#include "cli/commands.h"
#include "net/dns.h"

namespace brine::cli {

using nlohmann::json;

namespace {

constexpr std::chrono::seconds k_dns_timeout{5};

std::string addresses_text(const std::vector<asio::ip::address>& addresses) {
  std::string out;
  for (const auto& a : addresses) out += (out.empty() ? "" : " ") + a.to_string();
  return out;
}

}  // namespace

// What a minion with this configuration would connect to: the `master` list,
// or the SRV records of srv_domain through srv_resolver, looked up as the
// minion does and put in RFC 2782 order. With picks > 0, that order is drawn
// `picks` times and the count of each master coming first is shown: the
// spread that priorities and weights give over many minions.
int masters_command(const base::minion_config& cfg, const masters_options& o) {
  json out = {{"master_type", cfg.master_type == base::master_mode::failover   ? "failover"
                         : cfg.master_type == base::master_mode::disabled ? "disable"
                                                                          : "str"},
              {"masters", json::array()}};
  if (!cfg.use_srv_records) {
    out["source"] = cfg.source;
    for (const auto& m : cfg.masters) out["masters"].push_back({{"master", m.text()}});
    if (o.json) {
      std::cout << out.dump(4) << "\n";
    } else {
      std::cout << "masters from 'master' in " << cfg.source
                << (cfg.random_master ? " (shuffled at start: random_master)" : "") << ":\n";
      for (const auto& m : cfg.masters) std::cout << "  " << m.text() << "\n";
    }
    return 0;
  }
  std::string name = "_brine._tcp." + cfg.srv_domain;
  auto answer = net::lookup_srv(name, cfg.srv_resolver, k_dns_timeout);
  std::mt19937_64 rng{std::random_device{}()};
  auto order = net::rfc2782_order(answer.records, rng);
  out["source"] = name;
  out["resolver"] = cfg.srv_resolver.empty() ? "system" : cfg.srv_resolver;
  out["ttl"] = answer.ttl;
  std::vector<std::string> where;  // per master: its addresses, or why it has none
  for (const auto& r : order) {
    json entry = {{"master", base::master_address{r.target, r.port}.text()},
                  {"priority", r.priority},
                  {"weight", r.weight},
                  {"ttl", r.ttl}};
    try {
      auto hosts = net::lookup_host(r.target, cfg.srv_resolver, k_dns_timeout);
      entry["addresses"] = json::array();
      for (const auto& a : hosts.addresses) entry["addresses"].push_back(a.to_string());
      where.push_back(addresses_text(hosts.addresses));
    } catch (const base::error& e) {
      entry["error"] = e.what();
      where.push_back(e.what());
    }
    out["masters"].push_back(entry);
  }
  std::map<std::string, uint64_t> first;
  for (uint64_t i = 0; i < o.picks; ++i) {
    auto pick = net::rfc2782_order(answer.records, rng);
    ++first[base::master_address{pick.front().target, pick.front().port}.text()];
  }
  if (o.picks > 0) out["first"] = first;
  if (o.json) {
    std::cout << out.dump(4) << "\n";
    return 0;
  }
  std::cout << "masters from the SRV records of " << name << " at "
            << out["resolver"].get<std::string>() << " (TTL " << answer.ttl
            << " s), in the order of one draw:\n";
  for (size_t i = 0; i < order.size(); ++i) {
    std::cout << fmt::format("  {:<40} priority {:>5}  weight {:>5}  {}\n",
                             base::master_address{order[i].target, order[i].port}.text(),
                             order[i].priority, order[i].weight, where[i]);
  }
  if (o.picks > 0) {
    std::cout << "first choice over " << o.picks << " draws:\n";
    for (const auto& [m, n] : first) {
      std::cout << fmt::format("  {:<40} {:>8} ({:.1f} %)\n", m, n,
                               100.0 * static_cast<double>(n) / static_cast<double>(o.picks));
    }
  }
  return 0;
}

}  // namespace brine::cli
