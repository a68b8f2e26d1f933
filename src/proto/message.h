#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace brine::proto {

// Wire message types. Append-only: a value, once shipped, keeps its meaning.
enum class msg_type : uint16_t {
  error = 1,         // either way: {message}; the sender closes afterwards
  auth = 2,          // minion → master: {id, version, purpose?: returns|call}
  auth_reply = 3,    // master → minion: {status: accepted|pending|rejected|denied, message}
  publish = 4,       // master → minion: {jid, fun, args, kwargs, tgt, tgt_type}
  job_ack = 5,       // minion → master: {jid}: received (also for a jid it already ran)
  job_return = 6,    // minion → master: {jid, id, fun, ret, success, retcode, origin}
  return_ack = 7,    // master → minion: {jid}: stored, the minion may forget it
  ping = 8,          // either way: {}
  pong = 9,          // either way: {}
  job_refused = 10,  // minion → master: {jid, reason}: the minion will not run it
  grains = 11,       // minion → master: {grains}: its grains, after each acceptance and refresh
  pillar = 12,       // master → minion: {pillar}: compiled for it alone, never broadcast
  // minion → master: {}: compile my pillar again and send it; on a call
  // connection {grains}: compile it with these grains, answer (pillar, same
  // request id) on this connection only.
  pillar_request = 13,
  // minion → master: {op: envs|list|get, saltenv, ...}: the salt:// file
  // server (docs/protocol.md); answered by file_reply with the same id.
  file_request = 14,
  file_reply = 15,  // master → minion: the answer to the file_request of that id
  // master ↔ master, on the peer port: {cluster_id, name, peer, finger,
  // cluster_finger, proof}: who the sender is, proved with the cluster key;
  // the first message each way (docs/protocol.md, "Peer links").
  peer_hello = 16,
  // Scheduled runs (docs/protocol.md, "Scheduled runs"); sent only to a
  // master whose auth_reply lists the `schedule` feature.
  // minion → master: {jobs: [{name, fun, seconds, splay, enabled}]}: its
  // schedule, after its grains on each acceptance.
  schedule = 17,
  // master → minion: {harmonic_base, periods: {name: seconds}}: the periods
  // the minion's jobs are to run at (the answer to `schedule`).
  schedule_periods = 18,
  // minion → master: {name, fun, args, kwargs, slot, timeout}: may this
  // scheduled run start now? Answered by run_reply with the same id.
  run_request = 19,
  // master → minion: {jid} (go: the job is recorded) or {retry_after,
  // reason} (admission refused for now; ask again after about that many
  // seconds).
  run_reply = 20,
  // Compile masters (docs/protocol.md, "Compile masters"); sent only to a
  // master whose auth_reply lists the `compile` feature.
  // minion → master: {fun, mods, saltenv, exclude, grains, pillar (MessagePack
  // bytes, in order), pillar_compiled_here, opts, jid}: compile this run.
  compile_request = 21,
  // master → minion: {kind: chunks|errors|no_top|minion, chunks (MessagePack
  // bytes), files: [{saltenv, path, hash, size, mode}], errors, reason,
  // cached}: the answer to the compile_request of that id.
  compile_reply = 22,
  // master → minion: {reason}: the master closes this connection next;
  // connect again (a cluster member over its share of minions sheds some to
  // the others through the load balancer). In-flight returns are re-sent
  // after the reconnect, as after any lost connection.
  reconnect = 23,
  // Local API (Unix socket, CLI ↔ master).
  api_request = 100,  // {op, ...}
  api_reply = 101,    // {ok, error?, ...}
  api_event = 102,    // {tag, data}
  api_end = 103,      // {}: the stream for this request id is over
};

// The api_reply body that refuses a request: {ok: false, error}.
inline nlohmann::json api_error(std::string message) {
  return {{"ok", false}, {"error", std::move(message)}};
}

// The job_refused reason of a minion that a greedy publish reached but that
// its own grains do not target: neither run nor an error.
inline constexpr std::string_view k_not_targeted = "not targeted";

// auth's `purpose`. Absent: the minion's session (jobs, grains, pillar).
// returns: a failover minion's link to a master it has left, delivering only
// the returns it owes. call: a one-shot connection of `brine call` that asks
// for the pillar and nothing else; it never replaces the minion's session.
inline constexpr std::string_view k_purpose_returns = "returns";
inline constexpr std::string_view k_purpose_call = "call";

// auth_reply's `features` (a list, absent from older masters): what the
// master takes beyond the first protocol. A minion sends a message of a
// feature only to a master that lists it (an older master would close the
// connection on an unknown type).
inline constexpr std::string_view k_feature_schedule = "schedule";
inline constexpr std::string_view k_feature_compile = "compile";

std::optional<msg_type> to_msg_type(uint64_t raw);
std::string_view to_string(msg_type t);

// A decoded frame: its type, the request id it answers or belongs to (0 when
// none) and the body map.
struct message {
  msg_type type = msg_type::error;
  uint64_t id = 0;
  nlohmann::json body = nlohmann::json::object();
};

}  // namespace brine::proto
