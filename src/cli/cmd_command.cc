#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <set>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "cli/api_client.h"
#include "cli/commands.h"
#include "cli/output.h"

namespace brine::cli {

using nlohmann::json;

namespace {

// Exit statuses: 0 every targeted minion returned successfully; 1 a function
// failed on some minion; 2 some minion did not return (or none matched).
constexpr int k_exit_failed = 1;
constexpr int k_exit_missing = 2;

}  // namespace

int cmd_command(const base::master_config& cfg, const cmd_options& o) {
  auto client = api_client::connect(cfg.sock_dir);
  if (!client) {
    throw base::error("no master is running with sock_dir " + cfg.sock_dir + " (from " +
                      cfg.source + "); start it with 'brine master -c " + cfg.source + "'");
  }
  json args, kwargs;
  split_args(o.words, args, kwargs);
  json body = {{"target", o.target},
               {"tgt_type", o.list ? "list" : "glob"},
               {"fun", o.fun},
               {"args", args},
               {"kwargs", kwargs},
               {"user", ::getenv("USER") ? ::getenv("USER") : ""}};
  auto start = std::chrono::steady_clock::now();
  json reply = client->request("publish", body);
  if (!reply.value("ok", false)) {
    std::cerr << reply.value("error", "publish failed") << "\n";
    if (o.out == "json" && !o.async) std::cout << "{}\n";
    return k_exit_missing;
  }
  std::string jid = reply["jid"];
  std::vector<std::string> minions = reply["minions"];
  std::set<std::string> connected = reply["connected"].get<std::set<std::string>>();
  if (o.async) {
    std::cout << "Executed command with job ID: " << jid << "\n";
    return 0;
  }

  bool json_out = o.out == "json";
  bool progress = o.progress && !json_out && ::isatty(STDERR_FILENO) && ::isatty(STDOUT_FILENO);
  json returns = json::object();
  std::set<std::string> returned;
  bool failed = false;
  auto deadline = start + std::chrono::milliseconds(static_cast<long>(o.timeout * 1000));
  auto last_progress = std::chrono::steady_clock::time_point{};
  while (returned.size() < connected.size()) {
    auto wait_until = progress ? std::min(deadline, std::chrono::steady_clock::now() +
                                                        std::chrono::milliseconds(200))
                               : deadline;
    auto m = client->next(wait_until);
    auto now = std::chrono::steady_clock::now();
    if (progress && now - last_progress >= std::chrono::milliseconds(200)) {
      last_progress = now;
      std::fprintf(stderr, "\r[%zu/%zu returned, %.1f s]", returned.size(), minions.size(),
                   std::chrono::duration<double>(now - start).count());
      std::fflush(stderr);
    }
    if (!m) {
      if (now >= deadline) break;
      continue;
    }
    if (m->type != proto::msg_type::api_event) continue;
    const json& data = m->body["data"];
    std::string id = data.value("id", "");
    if (!returned.insert(id).second) continue;  // a resent return
    connected.insert(id);
    bool ok = data.value("success", false);
    failed |= !ok;
    if (json_out) {
      returns[id] = data["return"];
    } else {
      if (progress) std::fprintf(stderr, "\r\033[K");
      std::cout << nested(id, data["return"]) << std::flush;
    }
  }
  if (progress) std::fprintf(stderr, "\r\033[K");
  std::vector<std::string> missing;
  for (const auto& id : minions) {
    if (returned.count(id)) continue;
    missing.push_back(id);
    std::string why = connected.count(id) ? "[No response]" : "[Not connected]";
    if (json_out) {
      std::cerr << id << ": Minion did not return. " << why << "\n";
    } else {
      std::cout << nested(id, "Minion did not return. " + why);
    }
  }
  if (json_out) std::cout << returns.dump(4) << "\n";
  if (!missing.empty()) {
    std::cerr << missing.size() << " of " << minions.size() << " minions did not return within "
              << o.timeout << " s (jid " << jid << "; 'brine job show " << jid
              << "' shows late returns)\n";
    return k_exit_missing;
  }
  return failed ? k_exit_failed : 0;
}

int events_command(const base::master_config& cfg, const std::string& prefix, double seconds) {
  auto client = api_client::connect(cfg.sock_dir);
  if (!client) {
    throw base::error("no master is running with sock_dir " + cfg.sock_dir + " (from " +
                      cfg.source + ")");
  }
  json reply = client->request("events", {{"prefix", prefix}});
  if (!reply.value("ok", false)) throw base::error(reply.value("error", "events refused"));
  auto deadline = seconds > 0 ? std::chrono::steady_clock::now() +
                                    std::chrono::milliseconds(static_cast<long>(seconds * 1000))
                              : std::chrono::steady_clock::time_point::max();
  while (auto m = client->next(deadline)) {
    if (m->type != proto::msg_type::api_event) continue;
    std::cout << m->body["tag"].get<std::string>() << "\t" << m->body["data"].dump() << std::endl;
  }
  return 0;
}

}  // namespace brine::cli
