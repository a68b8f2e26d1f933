#pragma once

#include <chrono>
#include <string_view>

#include "metrics/metrics.h"

namespace brine::master {

// The master's figures, served as Prometheus text on metrics_port: each
// named once here, counted where it happens. The figures read when scraped
// (connected minions, keys per state, held publishes) are collectors that
// master.cc adds. Counting costs a relaxed atomic add (metrics.h) whether
// or not metrics_port is set.
//
// Lifecycle: made before the parts that count into it, kept as long as they.
struct figures {
  explicit figures(metrics::registry& r);

  metrics::registry& registry;
  // Minion connections: TLS handshakes done (ok) or failed, running now,
  // and waiting for a slot (max_concurrent_handshakes).
  metrics::family<metrics::counter>& handshakes;
  metrics::counter& handshakes_ok;
  metrics::counter& handshakes_failed;
  metrics::gauge& handshakes_in_flight;
  metrics::gauge& handshakes_waiting;
  // Connections closed at once because the descriptor limit was reached.
  metrics::counter& connections_refused;
  // New keys by the state they were given (pending: a sign-up waiting for
  // `brine key accept`).
  metrics::family<metrics::counter>& key_signups;
  // Returns received from minions connected here (jobs published and
  // publishes refused are collectors over the publisher's own counts).
  metrics::counter& returns_received;
  // Returns minions delivered to another master of the shared store, read
  // here from the store's change feed (store_sync).
  metrics::counter& feed_returns;
  // From a job's publish (its jid's time) to the arrival of each return.
  metrics::histogram& return_latency;
  // Publishes minions refused, by reason: spool_full (their return spool
  // is full), not_targeted, other.
  metrics::family<metrics::counter>& job_refusals;
  // Compiles on the master, by kind: pillar today (pillar_service), state
  // catalogs when the master compiles them (compile masters).
  metrics::family<metrics::histogram>& compile_seconds;
  // Compile masters: catalog cache lookups by result (hit, miss), and
  // compile requests answered "compile on the minion" (not named by
  // state_compile_target, or a template that needs the minion).
  metrics::family<metrics::counter>& catalog_lookups;
  metrics::counter& catalogs_to_minion;
  // State runs stored as reports, by status (changed, unchanged, failed).
  metrics::family<metrics::histogram>& state_run_seconds;
  // salt:// requests answered and the file bytes they carried.
  metrics::counter& file_requests;
  metrics::counter& file_bytes;
  // Store calls on the store thread, by operation.
  metrics::family<metrics::histogram>& store_seconds;
  metrics::histogram& store_add_returns;
  metrics::histogram& store_add_reports;
  metrics::histogram& store_task;

  // The job_refusals child for a minion's reason.
  metrics::counter& refusal(std::string_view reason);
};

// Seconds since `start`, for observe().
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace brine::master
