#include <chrono>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "cli/api_client.h"
#include "cli/commands.h"

namespace brine::cli {

using nlohmann::json;

int fileserver_command(const base::master_config& cfg, const fileserver_options& o) {
  auto client = api_client::connect(cfg.sock_dir);
  if (!client) {
    throw base::error("no master answers on " + cfg.sock_dir +
                      "/master.sock; `brine fileserver update` asks a running master to fetch "
                      "and pin (start it, or check sock_dir in " +
                      cfg.source + ")");
  }
  // Fetching every remote may take a while on a slow link.
  json reply =
      client->request("fileserver_update", json::object(), std::chrono::seconds(o.timeout));
  if (o.json) {
    std::cout << reply.dump() << "\n";
    return reply.value("ok", false) ? 0 : 1;
  }
  for (const auto& e : reply.value("errors", json::array())) {
    if (e.is_string()) std::cerr << "brine: " << e.get<std::string>() << "\n";
  }
  if (!reply.value("ok", false))
    throw base::error(reply.value("error", "fileserver update failed"));
  std::map<std::string, std::vector<json>> by_remote;
  for (const auto& p : reply.value("pins", json::array()))
    by_remote[p.value("remote", "")].push_back(p);
  for (const auto& [remote, pins] : by_remote) {
    std::cout << remote << ":\n";
    for (const auto& p : pins) {
      std::cout << "  " << p.value("saltenv", "") << ": " << p.value("commit", "") << " ("
                << p.value("ref", "") << ")\n";
    }
  }
  if (by_remote.empty()) std::cout << "no revision pinned\n";
  return reply.value("errors", json::array()).empty() ? 0 : 1;
}

}  // namespace brine::cli
