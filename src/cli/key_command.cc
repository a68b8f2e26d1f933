#include <algorithm>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "base/error.h"
#include "base/fs.h"
#include "cli/api_client.h"
#include "cli/commands.h"
#include "pki/key_registry.h"
#include "pki/keys.h"
#include "store/store.h"

namespace brine::cli {

using nlohmann::json;

namespace {

int64_t unix_now() { return static_cast<int64_t>(::time(nullptr)); }

// Without a running master the CLI applies the same rules to the store itself.
json apply_offline(const base::master_config& cfg, const key_options& o) {
  auto db = open_store(cfg, false);
  pki::key_registry keys({cfg.auto_accept, cfg.autosign_file, cfg.autoreject_file});
  keys.load(db->load_keys());
  if (o.action == "list" || o.action == "finger") {
    json list = json::array();
    for (const auto& k : keys.list()) {
      list.push_back(
          {{"id", k.id}, {"state", store::to_string(k.state)}, {"fingerprint", k.fingerprint}});
    }
    // Only `finger` prints the master's own key; reading it starts OpenSSL
    // (its config file, its providers), a millisecond `list` does not need.
    std::string master_fp;
    std::string pub = cfg.pki_dir + "/master.pub";
    if (o.action == "finger" && base::file_exists(pub)) {
      if (auto k = pki::parse_public_pem(base::read_file(pub)))
        master_fp = pki::fingerprint(k.get());
    }
    return {{"ok", true}, {"keys", list}, {"master_fingerprint", master_fp}};
  }
  pki::key_op_result r;
  if (o.action == "accept") {
    r = keys.accept(o.match, o.include_rejected, o.include_denied, unix_now());
  } else if (o.action == "reject") {
    r = keys.reject(o.match, o.include_accepted, o.include_denied, unix_now());
  } else {
    r = keys.remove(o.match);
  }
  std::vector<store::key_write> batch;
  for (const auto& c : r.changes)
    batch.push_back({c.what == pki::key_change::kind::erase, c.record});
  db->write_keys(batch);
  return {{"ok", true}, {"ids", r.ids}};
}

json call(const base::master_config& cfg, const key_options& o) {
  if (auto client = api_client::connect(cfg.sock_dir)) {
    json body = {{"match", o.match},
                 {"include_rejected", o.include_rejected},
                 {"include_accepted", o.include_accepted},
                 {"include_denied", o.include_denied}};
    std::string op = o.action == "finger" ? "key_list" : "key_" + o.action;
    return client->request(op, body);
  }
  return apply_offline(cfg, o);
}

}  // namespace

int key_command(const base::master_config& cfg, const key_options& o) {
  json reply = call(cfg, o);
  if (!reply.value("ok", false)) throw base::error(reply.value("error", "key operation failed"));

  if (o.action == "list" || o.action == "finger") {
    std::map<std::string, std::set<std::string>> by_state = {
        {"accepted", {}}, {"pending", {}}, {"rejected", {}}, {"denied", {}}};
    std::map<std::string, std::vector<std::pair<std::string, std::string>>> fingers;
    for (const auto& k : reply["keys"]) {
      std::string id = k["id"], state = k["state"];
      if (!pki::glob_match(o.match, id)) continue;
      by_state[state].insert(id);
      fingers[state].emplace_back(id, k["fingerprint"]);
    }
    const std::vector<std::pair<std::string, std::string>> order = {{"accepted", "Accepted Keys:"},
                                                                    {"denied", "Denied Keys:"},
                                                                    {"pending", "Unaccepted Keys:"},
                                                                    {"rejected", "Rejected Keys:"}};
    if (o.action == "list") {
      if (o.json) {
        json out = json::object();
        for (const auto& [state, ids] : by_state) out[state] = ids;
        std::cout << out.dump() << "\n";
        return 0;
      }
      for (const auto& [state, title] : order) {
        std::cout << title << "\n";
        for (const auto& id : by_state[state]) std::cout << id << "\n";
      }
      return 0;
    }
    if (o.json) {
      json out = json::object();
      out["local"] = {{"master.pub", reply.value("master_fingerprint", "")}};
      for (const auto& [state, list] : fingers) {
        json m = json::object();
        for (const auto& [id, fp] : list) m[id] = fp;
        out[state] = m;
      }
      std::cout << out.dump() << "\n";
      return 0;
    }
    if (o.match == "*") {
      std::cout << "Local Keys:\nmaster.pub:  " << reply.value("master_fingerprint", "") << "\n";
    }
    for (const auto& [state, title] : order) {
      auto& list = fingers[state];
      if (list.empty()) continue;
      std::sort(list.begin(), list.end());
      std::cout << title << "\n";
      for (const auto& [id, fp] : list) std::cout << id << ":  " << fp << "\n";
    }
    return 0;
  }

  std::vector<std::string> ids = reply.value("ids", std::vector<std::string>{});
  if (ids.empty()) {
    std::string which = o.action == "accept" ? "unaccepted"
                        : o.action == "reject"
                            ? (o.include_accepted ? "pending or accepted" : "pending")
                            : "";
    std::cerr << "The key glob '" << o.match << "' does not match any " << which
              << (which.empty() ? "" : " ") << "keys";
    if (o.action == "accept")
      std::cerr << " (rejected or denied keys need --include-rejected or --include-denied)";
    if (o.action == "reject" && !o.include_accepted) {
      std::cerr << " (with --all, accepted keys need --include-accepted)";
    }
    std::cerr << ".\n";
    return o.match == "*" ? 0 : 1;
  }
  const char* verb = o.action == "accept"   ? "accepted"
                     : o.action == "reject" ? "rejected"
                                            : "deleted";
  for (const auto& id : ids) std::cout << "Key for minion " << id << " " << verb << ".\n";
  return 0;
}

}  // namespace brine::cli
