#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "base/error.h"
#include "cli/api_client.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "proto/message.h"

namespace brine::cli {

using nlohmann::json;

namespace {

// Exit statuses: 0 every targeted minion returned successfully; 1 a function
// failed on some minion; 2 some minion did not return (or none matched).
constexpr int k_exit_failed = 1;
constexpr int k_exit_missing = 2;
// A malformed target expression (nothing was sent).
constexpr int k_exit_usage = 3;

constexpr std::chrono::milliseconds k_reason_grace{1000};

// An undelivered reason as Salt prints its [Not connected]: capitalised.
std::string bracketed(std::string reason) {
  if (!reason.empty())
    reason[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(reason[0])));
  return reason;
}

}  // namespace

int cmd_command(const base::master_config& cfg, const cmd_options& o) {
  auto client = api_client::connect(cfg.sock_dir);
  if (!client) {
    throw base::error("no master is running with sock_dir " + cfg.sock_dir + " (from " +
                      cfg.source + "); start it with 'brine master -c " + cfg.source + "'");
  }
  json args, kwargs;
  split_args(o.words, args, kwargs);
  json body = {{"target", o.target}, {"tgt_type", o.tgt_type}, {"delimiter", o.delimiter},
               {"fun", o.fun},       {"args", args},
               {"kwargs", kwargs},   {"user", ::getenv("USER") ? ::getenv("USER") : ""}};
  // The delivery deadline: a minion that is not connected gets the job if it
  // connects within -t. An --async job is held for the master's publish_hold.
  if (!o.async) body["timeout"] = o.timeout;
  auto start = std::chrono::steady_clock::now();
  json reply = client->request("publish", body);
  if (!reply.value("ok", false)) {
    std::cerr << reply.value("error", "publish failed") << "\n";
    if (reply.value("bad_target", false)) return k_exit_usage;
    if (o.out == "json" && !o.async) std::cout << "{}\n";
    return k_exit_missing;
  }
  std::string jid = reply["jid"];
  std::vector<std::string> minions = reply["minions"];
  // Listed ids that are not accepted minions: Salt reports them as not
  // returning.
  std::vector<std::string> absent = reply.value("missing", std::vector<std::string>{});
  std::set<std::string> connected = reply["connected"].get<std::set<std::string>>();
  if (o.async) {
    std::cout << "Executed command with job ID: " << jid << "\n";
    return 0;
  }

  bool json_out = o.out == "json";
  bool progress = o.progress && !json_out && ::isatty(STDERR_FILENO) && ::isatty(STDOUT_FILENO);
  json returns = json::object();
  std::set<std::string> returned;
  std::map<std::string, std::string> undelivered;  // minion -> reason
  bool failed = false;
  auto deadline = start + std::chrono::milliseconds(static_cast<long>(o.timeout * 1000));
  // The master records minions it could not reach at its own deadline, a
  // moment after ours; waiting that long names the reason instead of a guess.
  auto reasons_deadline = deadline + k_reason_grace;
  auto last_progress = std::chrono::steady_clock::time_point{};
  auto unresolved = [&] { return minions.size() - returned.size() - undelivered.size(); };
  while (unresolved() > 0) {
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      // Only a minion that was held (not connected at publish time) can
      // still get an undelivered record with a reason.
      bool held_left = std::any_of(minions.begin(), minions.end(), [&](const std::string& id) {
        return !returned.count(id) && !undelivered.count(id) && !connected.count(id);
      });
      if (!held_left || now >= reasons_deadline) break;
    }
    auto until = now < deadline ? deadline : reasons_deadline;
    auto wait_until = progress ? std::min(until, now + std::chrono::milliseconds(200)) : until;
    auto m = client->next(wait_until);
    now = std::chrono::steady_clock::now();
    if (progress && now - last_progress >= std::chrono::milliseconds(200)) {
      last_progress = now;
      std::fprintf(stderr, "\r[%zu/%zu returned, %.1f s]", returned.size(), minions.size(),
                   std::chrono::duration<double>(now - start).count());
      std::fflush(stderr);
    }
    if (!m || m->type != proto::msg_type::api_event) continue;
    const std::string tag = m->body.value("tag", "");
    const json& data = m->body["data"];
    std::string id = data.value("id", "");
    if (tag.find("/undelivered/") != std::string::npos) {
      std::string reason = data.value("reason", "not delivered");
      if (reason == proto::k_not_targeted) {
        // A greedy publish its own grains turned down: not a target after all.
        std::erase(minions, id);
        connected.erase(id);
        continue;
      }
      if (!returned.count(id)) undelivered.emplace(id, reason);
      continue;
    }
    if (!returned.insert(id).second) continue;  // a resent return
    undelivered.erase(id);
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
    std::string why;
    if (auto u = undelivered.find(id); u != undelivered.end()) {
      why = "[" + bracketed(u->second) + "]";
    } else {
      why = connected.count(id) ? "[No response]" : "[Not connected]";
    }
    if (json_out) {
      std::cerr << id << ": Minion did not return. " << why << "\n";
    } else {
      std::cout << nested(id, "Minion did not return. " + why);
    }
  }
  for (const auto& id : absent) {
    const std::string why = "Minion did not return. [No accepted key]";
    if (json_out) {
      std::cerr << id << ": " << why << "\n";
    } else {
      std::cout << nested(id, why);
    }
  }
  if (json_out) std::cout << returns.dump(4) << "\n";
  if (!missing.empty()) {
    std::cerr << missing.size() << " of " << minions.size() << " minions did not return within "
              << o.timeout << " s (jid " << jid << "; 'brine job show " << jid
              << "' shows late returns)\n";
    return k_exit_missing;
  }
  if (!absent.empty()) {
    std::cerr << absent.size() << " listed id(s) have no accepted key\n";
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
