#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "base/error.h"
#include "cli/api_client.h"
#include "cli/commands.h"
#include "cli/highstate_output.h"
#include "cli/output.h"
#include "proto/frame.h"
#include "proto/message.h"

namespace brine::cli {

using nlohmann::json;
using clock = std::chrono::steady_clock;

namespace {

// Exit statuses: 0 every targeted minion returned successfully; 1 a function
// failed on some minion; 2 some minion did not return (or none matched);
// 3 the target expression is malformed (nothing was sent).
constexpr int k_exit_failed = 1;
constexpr int k_exit_missing = 2;
constexpr int k_exit_usage = 3;

constexpr std::chrono::milliseconds k_reason_grace{1000};

// An undelivered reason as Salt prints its [Not connected]: capitalised.
std::string bracketed(std::string reason) {
  if (!reason.empty())
    reason[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(reason[0])));
  return reason;
}

clock::duration seconds(double s) {
  return std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(s));
}

// A return event's `return`: the bytes the minion made it into, read back
// in its key order (a plain map from older senders as it is).
nlohmann::ordered_json return_of(const json& data) {
  auto r = data.find("return");
  if (r == data.end()) return nullptr;
  auto value = proto::from_ordered_bytes(*r);
  return value ? std::move(*value)
               : nlohmann::ordered_json("ERROR: the master sent a return that is not MessagePack");
}

// Prints returns in Salt's outputters, as they come or (static, json) all at
// the end sorted by id. Minions that did not return go to stdout in the text
// formats and to stderr with json, so that stdout stays one JSON document.
class printer {
 public:
  explicit printer(const cmd_options& o) : o_(o) {}

  // `ret` in the key order the minion made it: --out json keeps it, as
  // Salt's json outputter does; the others print as Salt's do (nested and
  // yaml sort a return's keys, as msgpack's plain dicts reach them).
  void returned(const std::string& id, nlohmann::ordered_json ret) {
    if (o_.out == "json" || o_.static_out) {
      all_[id] = std::move(ret);
      return;
    }
    std::cout << format(id, json(ret)) << std::flush;
  }

  void did_not_return(const std::string& id, const std::string& why) {
    if (o_.hide_timeout) return;
    std::string text = "Minion did not return. " + why;
    if (o_.out == "json") {
      std::cerr << id << ": " << text << "\n";
    } else if (o_.static_out) {
      all_[id] = text;
    } else {
      std::cout << format(id, text);
    }
  }

  void finish() {
    if (o_.out == "json") {
      nlohmann::ordered_json doc = nlohmann::ordered_json::object();
      for (auto& [id, ret] : all_) doc[id] = std::move(ret);
      std::cout << doc.dump(4) << "\n";
    } else if (o_.static_out) {
      for (const auto& [id, ret] : all_) std::cout << format(id, json(ret));
    }
    std::cout << std::flush;
  }

 private:
  std::string format(const std::string& id, const json& ret) const {
    if (o_.out == "yaml") return yaml_out(id, ret);
    if (o_.out == "raw") return python_repr(json{{id, ret}}) + "\n";
    if (o_.out == "txt") return txt_out(id, ret);
    if (o_.out == "highstate") {
      highstate_options h;
      h.state_output = o_.state_output.empty() ? "full" : o_.state_output;
      h.state_verbose = o_.state_verbose.value_or(true);
      h.color = !o_.no_color && (o_.force_color || ::isatty(STDOUT_FILENO));
      return highstate_out(id, nlohmann::ordered_json(ret), h);
    }
    return nested(id, ret);
  }

  const cmd_options& o_;
  std::map<std::string, nlohmann::ordered_json> all_;  // by minion id
};

// How long a publish's answer is waited for: the master waits up to
// store_failover_wait for a store that does not answer (a failover), then
// answers with the reason; 15 s more for a busy master.
std::chrono::milliseconds publish_wait(const base::master_config& cfg) {
  return std::max<std::chrono::milliseconds>(std::chrono::seconds(30),
                                             std::chrono::seconds(cfg.store_failover_wait + 15));
}

json publish_body(const cmd_options& o, const std::string& target, const std::string& tgt_type) {
  json args, kwargs;
  split_args(o.words, args, kwargs);
  json body = {{"target", target}, {"tgt_type", tgt_type}, {"delimiter", o.delimiter},
               {"fun", o.fun},     {"args", args},        {"kwargs", kwargs}};
  // The delivery deadline: a minion that is not connected gets the job if it
  // connects within -t. An --async job is held for the master's publish_hold.
  if (!o.async) body["timeout"] = o.timeout;
  return body;
}

// What happened to one publish: returns as they come, undelivered records,
// and which minions were connected when it was sent.
struct tracker {
  std::set<std::string> returned;
  std::map<std::string, std::string> undelivered;  // minion -> reason
  std::set<std::string> not_targeted;              // greedy publishes turned down
  bool failed = false;

  // Handles one event; returns the id it settled, or "".
  std::string on_event(const proto::message& m, printer& out) {
    if (m.type != proto::msg_type::api_event) return "";
    const std::string tag = m.body.value("tag", "");
    const json& data = m.body["data"];
    std::string id = data.value("id", "");
    if (tag.find("/undelivered/") != std::string::npos) {
      std::string reason = data.value("reason", "not delivered");
      if (reason == proto::k_not_targeted) {
        not_targeted.insert(id);
        return id;
      }
      if (returned.count(id) || !undelivered.emplace(id, reason).second) return "";
      return id;
    }
    if (!returned.insert(id).second) return "";  // a resent return
    bool late = undelivered.erase(id) > 0;
    failed |= !data.value("success", false);
    out.returned(id, return_of(data));
    return late ? "" : id;
  }
};

int run_batch(api_client& client, const base::master_config& cfg, const cmd_options& o);


}  // namespace

int cmd_command(const base::master_config& cfg, const cmd_options& given) {
  // Salt's outputter of the function when none is asked for: highstate for
  // the state functions, nested for the rest.
  cmd_options o = given;
  if (o.out.empty()) o.out = is_state_function(o.fun) ? "highstate" : "nested";
  auto client = api_client::connect(cfg.sock_dir);
  if (!client) {
    throw base::error("no master is running with sock_dir " + cfg.sock_dir + " (from " +
                      cfg.source + "); start it with 'brine master -c " + cfg.source + "'");
  }
  if (!o.batch.empty()) return run_batch(*client, cfg, o);
  auto start = clock::now();
  json reply = client->request("publish", publish_body(o, o.target, o.tgt_type), publish_wait(cfg));
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
  if (o.show_jid) (o.out == "json" ? std::cerr : std::cout) << "jid: " << jid << "\n";

  printer out(o);
  tracker t;
  bool progress = o.progress && o.out != "json" && !o.static_out && ::isatty(STDERR_FILENO) &&
                  ::isatty(STDOUT_FILENO);
  auto deadline = start + seconds(o.timeout);
  // The master records minions it could not reach at its own deadline, a
  // moment after ours; waiting that long names the reason instead of a guess.
  auto reasons_deadline = deadline + k_reason_grace;
  auto last_progress = clock::time_point{};
  auto unresolved = [&] {
    return minions.size() - t.returned.size() - t.undelivered.size() - t.not_targeted.size();
  };
  while (unresolved() > 0) {
    auto now = clock::now();
    if (now >= deadline) {
      // Only a minion that was held (not connected at publish time) can
      // still get an undelivered record with a reason.
      bool held_left = std::any_of(minions.begin(), minions.end(), [&](const std::string& id) {
        return !t.returned.count(id) && !t.undelivered.count(id) && !connected.count(id) &&
               !t.not_targeted.count(id);
      });
      if (!held_left || now >= reasons_deadline) break;
    }
    auto until = now < deadline ? deadline : reasons_deadline;
    auto wait_until = progress ? std::min(until, now + std::chrono::milliseconds(200)) : until;
    auto m = client->next(wait_until);
    now = clock::now();
    if (progress && now - last_progress >= std::chrono::milliseconds(200)) {
      last_progress = now;
      std::fprintf(stderr, "\r[%zu/%zu returned, %.1f s]", t.returned.size(), minions.size(),
                   std::chrono::duration<double>(now - start).count());
      std::fflush(stderr);
    }
    if (!m) continue;
    if (progress) std::fprintf(stderr, "\r\033[K");
    t.on_event(*m, out);
  }
  if (progress) std::fprintf(stderr, "\r\033[K");
  // A greedy publish its own grains turned down: not a target after all.
  std::erase_if(minions, [&](const std::string& id) { return t.not_targeted.count(id) > 0; });
  std::vector<std::string> missing;
  for (const auto& id : minions) {
    if (t.returned.count(id)) continue;
    missing.push_back(id);
    if (auto u = t.undelivered.find(id); u != t.undelivered.end()) {
      out.did_not_return(id, "[" + bracketed(u->second) + "]");
    } else {
      out.did_not_return(id, connected.count(id) ? "[No response]" : "[Not connected]");
    }
  }
  for (const auto& id : absent) out.did_not_return(id, "[No accepted key]");
  out.finish();
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
  return t.failed ? k_exit_failed : 0;
}

namespace {

// N, or N% of `total` (at least 1).
size_t batch_size(const std::string& text, size_t total) {
  std::string digits = text;
  bool percent = !digits.empty() && digits.back() == '%';
  if (percent) digits.pop_back();
  double n = 0;
  try {
    size_t used = 0;
    n = std::stod(digits, &used);
    if (used != digits.size()) n = -1;
  } catch (const std::exception&) {
    n = -1;
  }
  if (!(n > 0) || (percent && n > 100) || (!percent && n != std::floor(n))) {
    throw base::error("--batch must be a number of minions (10) or a percentage (10%), got '" +
                      text + "'");
  }
  size_t size = percent ? static_cast<size_t>(std::ceil(static_cast<double>(total) * n / 100))
                        : static_cast<size_t>(n);
  return std::max<size_t>(1, size);
}

// Salt's batch: the targets a window at a time; a slot that frees up (a
// minion returned, or did not within -t) takes the next minion, after
// --batch-wait. Minions that are not connected are reported, not waited for.
// One window's publish: its minions as a list, and the user's expression
// beside it where it reads grains or pillar, so that a minion the master
// matched greedily (no grains cached) still decides for itself.
json window_body(const cmd_options& o, const std::string& list) {
  static const std::map<std::string, std::string, std::less<>> letters = {
      {"grain", "G"}, {"grain_pcre", "P"}, {"pillar", "I"}, {"pillar_pcre", "J"},
      {"ipcidr", "S"}};
  std::string term;
  if (auto l = letters.find(o.tgt_type); l != letters.end()) {
    term = l->second + (o.delimiter == ":" || o.tgt_type == "ipcidr" ? "" : o.delimiter) + "@" +
           o.target;
  } else if (o.tgt_type == "compound") {
    term = "( " + o.target + " )";
  }
  if (term.empty()) return publish_body(o, list, "list");
  json body = publish_body(o, "L@" + list + " and " + term, "compound");
  body["delimiter"] = ":";
  return body;
}

int run_batch(api_client& client, const base::master_config& cfg, const cmd_options& o) {
  json resolved = client.request("resolve", {{"target", o.target},
                                             {"tgt_type", o.tgt_type},
                                             {"delimiter", o.delimiter},
                                             {"fun", o.fun}});
  if (!resolved.value("ok", false)) {
    std::cerr << resolved.value("error", "cannot resolve the target") << "\n";
    return resolved.value("bad_target", false) ? k_exit_usage : k_exit_missing;
  }
  std::vector<std::string> minions = resolved["minions"];
  std::set<std::string> connected = resolved["connected"].get<std::set<std::string>>();
  std::vector<std::string> absent = resolved.value("missing", std::vector<std::string>{});
  if (minions.empty()) {
    std::cerr << "No minions matched the target. No command was sent, no jid was assigned.\n";
    if (o.out == "json") std::cout << "{}\n";
    return k_exit_missing;
  }
  size_t window = batch_size(o.batch, minions.size());
  printer out(o);
  tracker t;
  std::deque<std::string> queue;
  std::vector<std::string> down;
  for (const auto& id : minions) (connected.count(id) ? queue.push_back(id) : down.push_back(id));
  for (const auto& id : down) out.did_not_return(id, "[Not connected]");
  std::map<std::string, clock::time_point> active;  // minion -> its deadline
  std::vector<clock::time_point> free_at;           // slots freed, usable from then
  std::vector<std::string> no_response;
  std::set<std::string> skipped;
  if (o.out != "json") {
    std::cerr << "Batch of " << window << " over " << queue.size() << " connected minion(s)\n";
  }
  for (size_t i = 0; i < window; ++i) free_at.push_back(clock::now());
  while (!queue.empty() || !active.empty()) {
    // Fill the slots that are free now, with one job for all of them.
    auto now = clock::now();
    std::vector<std::string> take;
    std::sort(free_at.begin(), free_at.end());
    while (!queue.empty() && !free_at.empty() && free_at.front() <= now) {
      take.push_back(queue.front());
      queue.pop_front();
      free_at.erase(free_at.begin());
    }
    if (!take.empty()) {
      std::string list;
      for (const auto& id : take) {
        if (!list.empty()) list += ',';
        list += id;
      }
      if (o.out != "json") std::cerr << "Executing run on " << python_repr(json(take)) << "\n";
      json reply = client.request("publish", window_body(o, list), publish_wait(cfg));
      if (!reply.value("ok", false)) {
        std::cerr << reply.value("error", "publish failed") << "\n";
        for (const auto& id : take) {
          out.did_not_return(id, "[" + reply.value("error", "publish failed") + "]");
          skipped.insert(id);
          free_at.push_back(clock::now());
        }
        continue;
      }
      if (o.show_jid) {
        (o.out == "json" ? std::cerr : std::cout) << "jid: " << reply["jid"].get<std::string>()
                                                  << "\n";
      }
      for (const auto& id : take) active[id] = clock::now() + seconds(o.timeout);
    }
    // Wait for the next return, the next deadline, or the next slot.
    auto until = clock::time_point::max();
    for (const auto& [id, d] : active) until = std::min(until, d);
    if (!queue.empty() && !free_at.empty()) {
      until = std::min(until, *std::min_element(free_at.begin(), free_at.end()));
    }
    auto m = until > clock::now() ? client.next(until) : std::nullopt;
    if (m) {
      std::string id = t.on_event(*m, out);
      if (!id.empty() && active.erase(id) > 0) {
        if (auto u = t.undelivered.find(id); u != t.undelivered.end()) {
          out.did_not_return(id, "[" + bracketed(u->second) + "]");
        }
        free_at.push_back(clock::now() + seconds(o.batch_wait));
      }
    }
    now = clock::now();
    for (auto it = active.begin(); it != active.end();) {
      if (it->second <= now) {
        out.did_not_return(it->first, "[No response]");
        no_response.push_back(it->first);
        free_at.push_back(now + seconds(o.batch_wait));
        it = active.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (const auto& id : absent) out.did_not_return(id, "[No accepted key]");
  out.finish();
  size_t missing = down.size() + no_response.size() + t.undelivered.size() + skipped.size();
  if (missing > 0 || !absent.empty()) {
    std::cerr << missing + absent.size() << " of " << minions.size() + absent.size()
              << " minions did not return\n";
    return k_exit_missing;
  }
  return t.failed ? k_exit_failed : 0;
}

}  // namespace

int events_command(const base::master_config& cfg, const std::string& prefix, double secs,
                   bool json_out) {
  auto client = api_client::connect(cfg.sock_dir);
  if (!client) {
    throw base::error("no master is running with sock_dir " + cfg.sock_dir + " (from " +
                      cfg.source + ")");
  }
  json reply = client->request("events", {{"prefix", prefix}});
  if (!reply.value("ok", false)) throw base::error(reply.value("error", "events refused"));
  auto deadline = secs > 0 ? clock::now() + seconds(secs) : clock::time_point::max();
  while (auto m = client->next(deadline)) {
    if (m->type != proto::msg_type::api_event) continue;
    // A return's bytes read back, in the order the minion made it.
    nlohmann::ordered_json data = m->body["data"];
    if (data.is_object() && data.contains("return")) data["return"] = return_of(m->body["data"]);
    if (json_out) {
      nlohmann::ordered_json line = nlohmann::ordered_json::object();
      line["tag"] = m->body["tag"];
      line["data"] = std::move(data);
      std::cout << line.dump() << std::endl;
    } else {
      std::cout << m->body["tag"].get<std::string>() << "\t" << data.dump() << std::endl;
    }
  }
  return 0;
}

}  // namespace brine::cli
